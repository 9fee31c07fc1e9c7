import type { FastifyInstance, RouteOptions } from 'fastify'
import fp from 'fastify-plugin'
import { memoryBackend } from '../backends/memory/memory-backend.js'
import { AdmissionMetrics } from '../metrics/admission-metrics.js'
import { newCounters, type GateCounters, type RetryCounters } from '../metrics/counters.js'
import type { Reason } from '../metrics/reasons.js'
import { Pressure } from '../pressure/pressure.js'
import type { DelayProbe } from '../pressure/delay-probe.js'
import { exposeStatusRoute } from '../pressure/status-route.js'
import { exposeLivePage } from '../live/live-page.js'
import { decorateRates } from '../rates/decorate.js'
import { type Rates, RatesRuntime } from '../rates/rates.js'
import { clientKey, gateKey, keyFunction } from './client-key.js'
import { checkOnePerContext, decorateAdmission, statsOf, type AdmissionDecorator } from './decorator.js'
import { foreignRateLimitWarner } from './options/foreign-config.js'
import { onRequestByRoute, onRequestHook, preHandlerByRoute } from './on-request.js'
import { onResponseByRoute } from './on-response.js'
import type { AdmissionOptions, AdmissionRouteOptions, Settings } from './options/options.js'
import { validateOptions } from './options/options.js'
import { Planner } from './plan/planner.js'
import { listPlan } from './plan/plan.js'
import { openLimits, Quotas } from './quotas/quotas.js'
import { registrationAddress } from './quotas/registration-address.js'
import { registryOver } from './registry.js'
import { browserExposure } from './headers/rate-limit-fields.js'
import { exposedNames } from './headers/header-formats.js'
import { AdaptiveSampler } from './release/adaptive-sampler.js'
import { FleetShare } from './release/fleet-share.js'
import { isFleet, type FleetSettings } from './options/in-flight-options.js'
import { AdmissionOptionError } from './errors.js'
import type { ClientSlotBook, FleetMember, RatesBackend } from '../rates/backend.js'
import { ClientSlots } from './release/client-slots.js'
import { permitField, Slots } from './release/slots.js'
import { LongLivedConnections } from './release/long-lived.js'
import { HeldPermits } from './release/held-permits.js'
import { Offenders } from './offenders.js'
import { encloses, outerGates, routeRecord, see, unseenRoutes, type RouteRecord } from './route-record.js'
import type { AdmissionStats } from './stats.js'
import { RouteWiring } from './wiring.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** This route's admission settings; `false` opts the route out of both gates. */
    admission?: AdmissionRouteOptions | false
  }
  interface FastifyInstance {
    /** The nearest registration's gate: counters, registries, the 404 hook. */
    admission: AdmissionDecorator
    /** Named rate limiters; a limiter's quota belongs to the plugin (encapsulation context) that asked. */
    rates: Rates
  }
}

/** The plugin: one registration, whose every error reaches `done` (catchable at `register` and `ready`). */
function admission (fastify: FastifyInstance, options: AdmissionOptions, done: (err?: Error) => void): void {
  let started: Promise<void> | undefined
  try {
    started = register(fastify, options)
  } catch (error) {
    // A callback plugin must hand every error to `done` (a bad option, a stopped backend, a status
    // route that collides with a route of the application): avvio does not catch a synchronous
    // throw, and the process would end with it.
    done(error as Error)
    return
  }
  if (started === undefined) done()
  else started.then(() => { done() }, done)
}

/**
 * One registration, top to bottom: options checked, the backend chosen (and owned when the plugin
 * made it), the shared quota opened, the in-flight slots and pressure made, a plan put on every
 * route of the context and its children, the decorator set. A promise while the metrics start.
 */
function register (fastify: FastifyInstance, options: AdmissionOptions): Promise<void> | undefined {
  checkOnePerContext(fastify)
  const settings = validateOptions(options)
  const backend: RatesBackend = settings.backend ?? memoryBackend()
  // The plugin stops only a backend it made; one the application passed may serve other apps.
  decorateRates(fastify, new RatesRuntime(backend, settings.backend === undefined))
  const address = registrationAddress(fastify)
  // Metrics time the quotas' round trips; without them the quotas are the backend's own limiters.
  const metrics = settings.metrics === undefined ? undefined : new AdmissionMetrics(settings.metrics)
  const quotas = new Quotas(metrics === undefined ? backend : metrics.timer.over(backend), address, settings.version)
  // A stopped backend, one whose quota here already has another policy, or a custom backend whose limiter is not one.
  const shared = openLimits(quotas, '*', settings.rateLimit, false, 'rateLimit')
  const global = newCounters()
  // Off unless asked for: no timer, no sampler, and no step in any plan.
  const pressure = settings.pressure === undefined && settings.queueDelay === undefined ? undefined : new Pressure(fastify, settings.pressure, settings.queueDelay)
  const { slots, sampler, longLived } = inFlightGate(fastify, settings, backend, address, global, pressure?.probe)
  const retries: RetryCounters | undefined = settings.retries === undefined ? undefined : { admitted: 0, shed: 0 }
  const offenders = settings.offenders === undefined ? undefined : new Offenders(settings.offenders, settings.keyDigest)
  const planner = new Planner({
    outcomes: { global, slots, longLivedLimit: longLived.limit, log: fastify.log, registration: address, limitStatusCode: settings.limitStatusCode, onLimit: settings.onLimit, onShed: settings.onShed, expose: browserExposure(exposedNames(settings.headerFormats)), retries, offenders: offenders?.refused },
    slots,
    longLived,
    globalGate: settings.maxInFlight !== false,
    fullGate: fullGateReasons(settings.maxInFlight),
    sampler,
    pressure,
    retries: settings.retries,
    headers: settings.headers,
    formats: settings.headerFormats,
    partitionKey: settings.partitionKey,
    keyOf: keyFunction(settings.key, settings.ipv6Subnet),
    allowListSkipsShedding: settings.allowListSkipsShedding,
    responseBody: settings.responseBody,
    fastRefusals: settings.fastRefusals,
    log: fastify.log
  })
  const field = permitField(fastify)
  const record = routeRecord(fastify)
  record.fields.push(field)
  // Fastify versions before `handlerTimeout` leave it undefined, which compares as no timeout.
  const serverTimeout = (fastify.initialConfig as { handlerTimeout?: number }).handlerTimeout
  const wiring = new RouteWiring({ settings, quotas, shared, planner, log: fastify.log, field, serverTimeout, depth: depthOf(fastify), record, clientSlots: clientSlotsOf(fastify, backend, address) })
  const notFound = wiring.notFoundPlan()
  putOnRoutes(fastify, record, wiring, field, foreignRateLimitWarner(fastify.log, settings.rateLimit !== false))
  if (backend.reachable !== undefined && settings.rateLimit !== false) warnUnreachable(fastify, backend, settings.onBackendError)
  if (settings.permitWarningMs !== false) watchHeldPermits(fastify, wiring, settings.permitWarningMs)
  if (settings.pressure?.statusRoute !== undefined) exposeStatusRoute(fastify, settings.pressure, pressure!)

  const toKey = settings.key === undefined ? (key: string) => clientKey(key, settings.ipv6Subnet) : gateKey
  const counted = (): AdmissionStats => statsOf(global, wiring.gates.values(), backend, slots.limit, retries)
  const pressured = pressure === undefined ? counted : () => ({ ...counted(), pressure: pressure.counts() })
  const stats = offenders === undefined ? pressured : () => ({ ...pressured(), offenders: offenders.list() })
  if (settings.live !== undefined) exposeLivePage(fastify, settings.live, { stats, limit: () => slots.limit, inFlight: () => global.inFlight })
  decorateAdmission(fastify, Object.freeze({
    address,
    stats,
    get limit () { return slots.limit === 0 ? false : slots.limit },
    pressure: () => pressure?.status(),
    registry: registryOver(shared.limiter, toKey),
    registryOf: (route: string) => {
      const gate = wiring.gates.get(route)
      return gate?.limiter === undefined ? undefined : registryOver(gate.limiter, toKey)
    },
    plan: (route: string) => {
      const plan = wiring.plans.get(route)
      return plan === undefined ? undefined : listPlan(plan)
    },
    notFound: onRequestHook(notFound, field)
  } satisfies AdmissionDecorator))
  if (metrics === undefined) return undefined
  const source = { global, gates: () => wiring.gates.values(), limit: () => slots.limit, admitsOnBackendError: settings.onBackendError === 'allow', retries }
  return metrics.start(fastify, source, address)
}

/**
 * The in-flight slots: a fixed limit, or the adaptive limit's, moved by its sampler; a fleet's
 * share caps either (the fleet's limit itself, without the adaptive one). And the long-lived
 * connections' count, beside them.
 */
function inFlightGate (fastify: FastifyInstance, settings: Settings, backend: RatesBackend, address: string, global: GateCounters, loop: DelayProbe | undefined): { slots: Slots, sampler: AdaptiveSampler | undefined, longLived: LongLivedConnections } {
  const inFlight = settings.maxInFlight
  const fleet = isFleet(inFlight) ? inFlight : undefined
  const own = isFleet(inFlight) ? inFlight.adaptive ?? inFlight.fleet : inFlight
  const slots = new Slots(global, typeof own === 'number' ? own : 0, inFlight === false ? 0 : settings.criticalReserve, settings.retries?.reserve)
  // Beside the queue-delay probe, a request that waited for a busy loop is no sample of the downstream's latency.
  const sampler = typeof own === 'object' ? new AdaptiveSampler(slots, own.limit, undefined, loop === undefined ? undefined : () => loop.standing) : undefined
  const share = fleet === undefined ? undefined : new FleetShare(fleetMember(backend, address, fleet), fleet, slots, fastify.log)
  if (share !== undefined) fastify.addHook('onReady', () => share.start())
  fastify.addHook('onClose', (_instance, closed) => {
    sampler?.stop()
    if (share === undefined) closed()
    else share.stop().then(() => { closed() }, closed)
  })
  return { slots, sampler, longLived: new LongLivedConnections(global, settings.maxLongLived || 0) }
}

/**
 * Why the global gate is full: its limit; with a fleet, the fleet's share, which bounds a fixed limit
 * always (the share is at most the fleet's limit) and an adaptive one when it is the smaller.
 */
function fullGateReasons (inFlight: Settings['maxInFlight']): readonly Reason[] {
  if (!isFleet(inFlight)) return ['in-flight']
  return inFlight.adaptive === undefined ? ['fleet-in-flight'] : ['in-flight', 'fleet-in-flight']
}

/**
 * Where a client's in-flight slots are counted (`clientInFlight`), per address under the
 * registration's: on a backend the fleet shares (Redis), the fleet's, whose slots this process
 * gives back at close; otherwise this process's.
 */
function clientSlotsOf (fastify: FastifyInstance, backend: RatesBackend, address: string): (name: string) => ClientSlots | ClientSlotBook {
  if (backend.clientSlots === undefined) return () => new ClientSlots()
  const books: ClientSlotBook[] = []
  fastify.addHook('onClose', (_instance, closed) => {
    Promise.all(books.map((book) => book.stop())).then(() => { closed() }, closed)
  })
  return (name) => {
    const book = backend.clientSlots!(`${address}|${name}`)
    books.push(book)
    return book
  }
}

/**
 * The gate on the routes: every route a registration saw declared gets hooks of its own (those of
 * this context declared before it, now; the others at `onRoute`). Routes declared before any
 * registration watched never pass an `onRoute` of this plugin: the context's hooks find them at
 * their first request.
 */
function putOnRoutes (fastify: FastifyInstance, record: RouteRecord, wiring: RouteWiring, field: symbol, warnForeign: (route: RouteOptions) => void): void {
  if (unseenRoutes(fastify, record)) {
    const depth = depthOf(fastify)
    const hook = onRequestByRoute(wiring.planOf, field, outerGates(record, depth))
    record.contextGates.push({ context: fastify, depth, field, hook })
    fastify.addHook('onRequest', hook)
    fastify.addHook('preHandler', preHandlerByRoute(field))
    fastify.addHook('onResponse', onResponseByRoute(field))
  }
  for (const [route, context] of record.seen) {
    if (!encloses(fastify, context)) continue
    record.gated.add(route)
    wiring.wire(route, false)
  }
  fastify.addHook('onRoute', function admissionOnRoute (this: FastifyInstance, route) {
    see(record, this, route)
    warnForeign(route)
    record.gated.add(route)
    wiring.wire(route, true)
  })
}

/**
 * Permits held past `permitWarningMs` are logged: the sweep's timer runs from now (unref'd: it keeps
 * no process alive), not from an `onReady` hook — the plugin adds no hook that nothing needs.
 */
function watchHeldPermits (fastify: FastifyInstance, wiring: RouteWiring, thresholdMs: number): void {
  const held = new HeldPermits(() => wiring.gates.values(), thresholdMs)
  held.start()
  fastify.addHook('onClose', (_instance, closed) => { held.stop(); closed() })
}

/** The backend's membership of the fleet at the registration's address (every process of the fleet registers there). */
function fleetMember (backend: RatesBackend, address: string, fleet: FleetSettings): FleetMember {
  if (backend.fleet === undefined) {
    throw new AdmissionOptionError('maxInFlight.fleet', `set only on a backend every process of the fleet shares (redisBackend): the ${JSON.stringify(backend.kind)} backend has no fleet to be part of`, fleet.fleet)
  }
  return backend.fleet(address, fleet.ttlMs, fleet.fleet)
}

/**
 * A shared backend out of reach at start is said once, at `warn`, naming the backend and the fix;
 * `ready()` does not wait for it (Redis may come up after the app) and decisions fail as configured.
 */
function warnUnreachable (fastify: FastifyInstance, backend: RatesBackend, onBackendError: 'deny' | 'allow'): void {
  fastify.addHook('onReady', (ready) => {
    backend.reachable!().then(undefined, (error: unknown) => {
      fastify.log.warn({ backend: backend.kind, err: error },
        `fastify-admission: the ${backend.kind} backend cannot be reached at start (${(error as Error).message}); every rate-limit decision ${onBackendError === 'deny' ? 'is answered 503 with Retry-After' : 'admits the request'} (onBackendError: '${onBackendError}') until it answers. Check the client's address and credentials, and give the client an 'error' listener (ioredis prints every failed reconnection without one)`)
    })
    ready()
  })
}

/** How many contexts enclose `fastify` (the root: 0). */
function depthOf (fastify: FastifyInstance): number {
  let depth = 0
  for (let at = Object.getPrototypeOf(fastify) as object | null; at !== null && at !== Object.prototype; at = Object.getPrototypeOf(at) as object | null) depth++
  return depth
}

export const admissionPlugin = fp(admission, { fastify: '5.x', name: 'fastify-admission' })
