import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { memoryBackend } from '../backends/memory/memory-backend.js'
import type { RatesBackend } from '../rates/backend.js'
import { decorateRates } from '../rates/decorate.js'
import { type Rates, RatesRuntime } from '../rates/rates.js'
import { clientKey, gateKey } from './client-key.js'
import { decorateAdmission, registryOver, statsOf, type AdmissionDecorator } from './decorator.js'
import type { AdmissionOptions, AdmissionRouteOptions, Settings } from './options.js'
import { validateOptions } from './options.js'
import { AdaptivePermits } from './adaptive-permits.js'
import { Permits } from './permits.js'
import { Pressure } from '../pressure/pressure.js'
import { exposeStatusRoute } from '../pressure/status-route.js'
import { openLimits, Quotas, type OpenedLimits } from './quotas.js'
import { Checks } from './check-kinds.js'
import { registrationAddress } from './registration-address.js'
import { notFoundHook } from './route-hooks.js'
import { warnForeignRateLimit } from './foreign-config.js'
import { RouteWiring } from './route-wiring.js'
import { newCounters } from './stats.js'
import { AdmissionMetrics } from '../metrics/admission-metrics.js'

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

/**
 * One registration: options checked, the backend chosen (and owned when the plugin made it),
 * the shared quota opened, hooks wired on each route as it is added, the decorator set.
 */
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
  // The plugin stops only a backend it made; one the application passed may serve other apps.
  decorateRates(fastify, new RatesRuntime(backend, settings.backend === undefined))
  const address = registrationAddress(fastify)
  // Metrics time the quotas' round trips; without them the quotas are the backend's own limiters.
  const metrics = settings.metrics === undefined ? undefined : new AdmissionMetrics(settings.metrics)
  const quotas = new Quotas(metrics === undefined ? backend : metrics.timer.over(backend), address, settings.version)
  let shared: OpenedLimits
  try {
    shared = openLimits(quotas, '*', settings.rateLimit, false, 'rateLimit')
  } catch (error) {
    // A stopped backend, one whose quota here already has another policy, or a custom backend
    // whose limiter is not one.
    done(error as Error)
    return
  }
  const global = newCounters()
  const permits = permitsFor(fastify, global, settings)
  fastify.addHook('onClose', (_instance, closed) => { permits.stop(); closed() })
  const checks = new Checks(settings, global, permits, fastify.log, address)
  // The plugin's own kind of check: the 404 hook's and pressure's refusals.
  const check = checks.of(settings.enforce, settings.errorResponseBuilder)
  // Fastify versions before `handlerTimeout` leave it undefined, which compares as no timeout.
  const serverTimeout = (fastify.initialConfig as { handlerTimeout?: number }).handlerTimeout
  // Off unless asked for: no timer, no sampler, and the route hooks are the gate's own.
  const pressure = settings.pressure === undefined && settings.queueDelay === undefined ? undefined : new Pressure(fastify, settings.pressure, settings.queueDelay, check)
  const wiring = new RouteWiring(settings, quotas, shared, permits, checks, fastify.log, serverTimeout, pressure)
  const notFound = wiring.limitedGate('404', false, shared, settings.rateLimit, settings.cost, false)
  wiring.gates.set(notFound.name, notFound)
  fastify.addHook('onRoute', (route) => {
    warnForeignRateLimit(route, fastify.log)
    wiring.wire(route)
  })
  fastify.addHook('onReady', (ready) => { ready(wiring.errors[0]) })
  if (settings.pressure?.statusRoute !== undefined) exposeStatusRoute(fastify, settings.pressure, pressure!)
  const notFoundGate = notFoundHook(notFound, permits, check, settings.allowList, !settings.enforce)

  const toKey = settings.key === undefined
    ? (key: string) => clientKey(key, settings.ipv6Subnet)
    : gateKey
  decorateAdmission(fastify, Object.freeze({
    address,
    stats: pressure === undefined
      ? () => statsOf(global, wiring.gates.values(), backend, permits.currentLimit)
      : () => ({ ...statsOf(global, wiring.gates.values(), backend, permits.currentLimit), pressure: pressure.counts() }),
    get limit () { return permits.currentLimit === 0 ? false : permits.currentLimit },
    pressure: () => pressure?.status(),
    registry: registryOver(shared.limiter, toKey),
    registryOf: (route: string) => {
      const gate = wiring.gates.get(route)
      return gate?.limiter === undefined ? undefined : registryOver(gate.limiter, toKey)
    },
    notFound: pressure === undefined ? notFoundGate : pressure.hook(notFound, notFoundGate)
  } satisfies AdmissionDecorator))
  if (metrics === undefined) {
    done()
    return
  }
  const source = { global, gates: () => wiring.gates.values(), limit: () => permits.currentLimit, admitsOnBackendError: settings.onBackendError === 'allow' }
  metrics.start(fastify, source, address).then(() => { done() }, done)
}

/** The permits of the global gate: chosen here, so that a fixed limit never runs the adaptive one's code. */
function permitsFor (fastify: FastifyInstance, global: ReturnType<typeof newCounters>, settings: Settings): Permits {
  const inFlight = settings.maxInFlight
  if (inFlight === false) return new Permits(fastify, global, 0)
  if (typeof inFlight === 'number') return new Permits(fastify, global, inFlight, settings.criticalReserve)
  return new AdaptivePermits(fastify, global, inFlight.limit, settings.criticalReserve)
}

export const admissionPlugin = fp(admission, { fastify: '5.x', name: 'fastify-admission' })
