import type { FastifyInstance, RouteOptions } from 'fastify'
import fp from 'fastify-plugin'
import type { Policy } from '../core/rates/types.js'
import { RateCheck } from './rate-check.js'
import { routeConfigReader } from './route-config.js'
import type { RouteGate } from './route-gate.js'
import { type Handler, Slots } from './permits.js'
import { policyHeader } from './headers.js'
import { validateOptions, validateRouteOptions, type AdmissionOptions, type AdmissionRouteOptions, type Settings } from './options.js'
import type { BackendLimiter, RatesBackend } from '../rates/backend.js'
import { decorateRates } from '../rates/decorate.js'
import { MemoryBackend, MemoryBackendLimiter, memoryBackend } from '../backends/memory/memory-backend.js'
import { type Rates, RatesRuntime } from '../rates/rates.js'
import { type AdmissionStats, copyCounters, type GateCounters, newCounters } from './stats.js'

export interface AdmissionDecorator {
  /** A snapshot of the counters. */
  stats (): AdmissionStats
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** This route's admission settings; `false` opts the route out of both gates. */
    admission?: AdmissionRouteOptions | false
  }
  interface FastifyInstance {
    admission: AdmissionDecorator
    /** Named rate limiters; a limiter's quota belongs to the plugin (encapsulation context) that asked. */
    rates: Rates
  }
}

function admission (fastify: FastifyInstance, options: AdmissionOptions, done: (err?: Error) => void): void {
  let settings: Settings
  let backend: RatesBackend
  try {
    settings = validateOptions(options)
    backend = settings.backend ?? memoryBackend(settings.maxIdentities === undefined ? {} : { maxIdentities: settings.maxIdentities })
  } catch (error) {
    // A callback plugin must hand its error to `done`: avvio does not catch a synchronous throw.
    done(error as Error)
    return
  }
  const runtime = new RatesRuntime(backend)
  const addresses = decorateRates(fastify, runtime)
  const memory = backend instanceof MemoryBackend ? backend : undefined
  const global = newCounters()
  const routes = new Map<string, RouteGate>()

  // The gate's limiters live in the same backend as the rates capability's, under addresses of
  // their own: one policy language and one mechanism for both.
  const limiterAt = (name: string, policy: Readonly<Policy> | false): BackendLimiter | undefined =>
    policy === false ? undefined : backend.limiter(`${addresses.of(fastify)}#admission:${encodeURIComponent(name)}`, policy)
  const gateOf = (name: string, maxInFlight: number | false, limiter: BackendLimiter | undefined, cost: number, waitsForHandler: boolean): RouteGate => {
    const gate: RouteGate = {
      name,
      counters: routes.get(name)?.counters ?? newCounters(),
      maxInFlight: maxInFlight === false ? 0 : maxInFlight,
      local: limiter instanceof MemoryBackendLimiter ? limiter.store : undefined,
      remote: limiter instanceof MemoryBackendLimiter ? undefined : limiter,
      policyHeader: limiter !== undefined && settings.headers ? policyHeader(limiter.policy) : undefined,
      cost,
      waitsForHandler
    }
    routes.set(name, gate)
    return gate
  }
  // Routes without a limit of their own share the plugin's quota.
  let sharedLimiter: BackendLimiter | undefined
  try {
    sharedLimiter = limiterAt('*', settings.rateLimit)
  } catch (error) {
    // A stopped backend, or one whose quota here already has another policy.
    done(error as Error)
    return
  }
  // Requests of routes this registration never saw (not found, or added before it) share one gate.
  const unseen = gateOf('404', false, sharedLimiter, settings.cost, false)
  const slots = new Slots(fastify, global, settings.maxInFlight === false ? 0 : settings.maxInFlight, unseen)
  const check = new RateCheck(settings, global, slots, memory?.clock ?? Date.now)
  const kGate = Symbol('admission.gate')
  // Fastify versions before `handlerTimeout` leave it undefined, which compares as no timeout.
  const serverTimeout = (fastify.initialConfig as { handlerTimeout?: number }).handlerTimeout
  const configErrors: Error[] = []
  // GET and its automatic HEAD share one `config` object: they share one gate and its quota.
  const gatesByConfig = new WeakMap<object, RouteGate | false>()

  fastify.addHook('onRoute', (route: RouteOptions) => {
    const config = route.config as Record<PropertyKey, unknown> | undefined
    const name = `${Array.isArray(route.method) ? route.method.join(',') : route.method} ${route.url}`
    let gate = config === undefined ? undefined : gatesByConfig.get(config)
    if (gate === undefined) {
      const waits = Number(route.handlerTimeout ?? serverTimeout) > 0
      const own = config?.admission
      try {
        const parsed = own === undefined ? undefined : validateRouteOptions(own, name, settings)
        if (parsed === false) gate = false
        else if (parsed === undefined) gate = gateOf(name, false, sharedLimiter, settings.cost, waits)
        else gate = gateOf(name, parsed.maxInFlight, parsed.rateLimit === undefined ? sharedLimiter : limiterAt(name, parsed.rateLimit), parsed.cost, waits)
      } catch (error) {
        // Reported at ready() (the first one), where Fastify users expect a bad route to fail.
        configErrors.push(error as Error)
        gate = false
      }
      if (config !== undefined) gatesByConfig.set(config, gate)
    }
    route.config = { ...config, [kGate]: gate } as RouteOptions['config']
    if (gate !== false) route.handler = slots.watch(route.handler as Handler, gate.waitsForHandler)
  })

  fastify.addHook('onReady', (ready) => { ready(configErrors[0]) })

  const configOf = routeConfigReader()
  // Shed, then limit: a request the in-flight gates refuse touches no quota.
  fastify.addHook('onRequest', function admissionOnRequest (request, reply, next) {
    const gate = (configOf(request)[kGate] as RouteGate | false | undefined) ?? unseen
    if (gate === false) { next(); return }
    if (!slots.take(request, gate)) { check.shed(request, reply, gate, 1); return }
    if (gate.local === undefined && gate.remote === undefined) check.admit(reply, gate, next)
    else check.run(request, reply, gate, next)
  })

  const stats = (): AdmissionStats => {
    const perRoute: Record<string, GateCounters> = {}
    for (const [name, gate] of routes) perRoute[name] = copyCounters(gate.counters)
    return { ...copyCounters(global), identities: memory?.identities ?? 0, routes: perRoute }
  }
  if (!fastify.hasDecorator('admission')) fastify.decorate('admission', { stats })
  done()
}

export const admissionPlugin = fp(admission, { fastify: '5.x', name: 'fastify-admission' })
