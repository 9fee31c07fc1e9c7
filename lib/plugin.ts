import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify'
import fp from 'fastify-plugin'
import { acquire, release } from './core/index.js'
import { AdmissionKeyError } from './errors.js'
import { clientKey } from './client-key.js'
import { monotonicMs } from './clock.js'
import { validateOptions, validateRouteOptions, type AdmissionOptions, type Settings } from './options.js'
import { refuse } from './responses.js'
import { type AdmissionStats, copyCounters, type GateCounters, newCounters } from './stats.js'
import { ADMITTED, LIMITED, TokenBucketLimiter } from './token-bucket.js'
import { policyHeader, rateLimitHeader } from './headers.js'

// Per-request flags of one registration.
const HELD_GLOBAL = 1
const HELD_ROUTE = 2
const HELD = HELD_GLOBAL | HELD_ROUTE
const ABORTED = 4
const STARTED = 8
/** The handler's promise is pending and the route has a handler timeout: wait for it. */
const RUNNING = 16
/** The response ended while the handler still ran. */
const ENDED = 32

/** What a registration knows of one route. */
interface RouteGate {
  readonly name: string
  readonly counters: GateCounters
  /** The route's own semaphore, or 0 for none. */
  readonly maxInFlight: number
  readonly limiter: TokenBucketLimiter | undefined
  readonly policy: string | undefined
  readonly cost: number
  readonly waitsForHandler: boolean
}

export interface AdmissionDecorator {
  /** A snapshot of the counters. */
  stats (): AdmissionStats
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** This route's admission settings; `false` opts the route out of both gates. */
    admission?: import('./options.js').AdmissionRouteOptions | false
  }
  interface FastifyInstance {
    admission: AdmissionDecorator
  }
}

type Handler = (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) => unknown
type Slots = Record<symbol, number>

function isThenable (value: unknown): value is PromiseLike<unknown> {
  return value !== null && typeof value === 'object' && typeof (value as { then?: unknown }).then === 'function'
}

function admission (fastify: FastifyInstance, options: AdmissionOptions, done: (err?: Error) => void): void {
  let settings: Settings
  try {
    settings = validateOptions(options)
  } catch (error) {
    // A callback plugin must hand its error to `done`: avvio does not catch a synchronous throw.
    done(error as Error)
    return
  }
  // Each registration has its own per-request fields, so two registrations are two gates.
  const kFlags = Symbol('admission.flags')
  const kRoute = Symbol('admission.route')
  const kWork = Symbol('admission.work')
  const kReply = Symbol('admission.reply')
  const kGate = Symbol('admission.gate')
  fastify.decorateRequest(kFlags, 0)
  fastify.decorateRequest(kRoute, null)
  fastify.decorateRequest(kWork, null)
  fastify.decorateRequest(kReply, null)

  const global = newCounters()
  const maxInFlight = settings.maxInFlight === false ? 0 : settings.maxInFlight
  const limiters: TokenBucketLimiter[] = []
  const newLimiter = (policy: Settings['rateLimit'] | undefined): TokenBucketLimiter | undefined => {
    if (policy === false || policy === undefined) return undefined
    const limiter = new TokenBucketLimiter(policy, settings.maxIdentities)
    limiters.push(limiter)
    return limiter
  }
  const globalLimiter = newLimiter(settings.rateLimit)
  const routes = new Map<string, RouteGate>()
  const newGate = (name: string, maxInFlight: number, limiter: TokenBucketLimiter | undefined, cost: number, waitsForHandler: boolean): RouteGate => {
    const gate: RouteGate = {
      name,
      counters: routes.get(name)?.counters ?? newCounters(),
      maxInFlight,
      limiter,
      policy: limiter && settings.headers ? policyHeader(limiter.policy) : undefined,
      cost,
      waitsForHandler
    }
    routes.set(name, gate)
    return gate
  }
  // Requests of routes this registration never saw (not found, or added before it) share one gate.
  const unseen = newGate('404', 0, globalLimiter, settings.cost, false)
  const serverTimeout = (fastify.initialConfig as { handlerTimeout?: number }).handlerTimeout ?? 0
  const keyOf = settings.key
  const subnet = settings.ipv6Subnet
  const configErrors: Error[] = []
  // GET and its automatic HEAD share one `config` object: they share one gate and its buckets.
  const gatesByConfig = new WeakMap<object, RouteGate | false>()

  fastify.addHook('onRoute', (route: RouteOptions) => {
    const config = route.config as Record<PropertyKey, unknown> | undefined
    const methods = Array.isArray(route.method) ? route.method.join(',') : route.method
    const name = `${methods} ${route.url}`
    let gate = config === undefined ? undefined : gatesByConfig.get(config)
    if (gate === undefined) {
      const waits = (route.handlerTimeout ?? serverTimeout) > 0
      const own = config?.admission
      if (own === undefined) {
        gate = newGate(name, 0, globalLimiter, settings.cost, waits)
      } else {
        try {
          const parsed = validateRouteOptions(own, name, settings)
          gate = parsed === false
            ? false
            : newGate(name, parsed.maxInFlight === false ? 0 : parsed.maxInFlight,
              parsed.rateLimit === undefined ? globalLimiter : newLimiter(parsed.rateLimit), parsed.cost, waits)
        } catch (error) {
          // Reported at ready() (the first one), where Fastify users expect a bad route to fail.
          configErrors.push(error as Error)
          gate = false
        }
      }
      if (config !== undefined) gatesByConfig.set(config, gate)
    }
    route.config = { ...config, [kGate]: gate } as RouteOptions['config']
    if (gate !== false) route.handler = watchHandler(route.handler as Handler, gate.waitsForHandler)
  })

  fastify.addHook('onReady', (ready) => { ready(configErrors[0]) })

  /** Gives back every slot the request holds, once. */
  function free (request: FastifyRequest): void {
    const slots = request as unknown as Slots
    const flags = slots[kFlags]!
    if ((flags & HELD) === 0) return
    slots[kFlags] = flags & ~HELD
    if ((flags & HELD_GLOBAL) !== 0) global.inFlight = release(global.inFlight)
    const gate = (request as unknown as Record<symbol, RouteGate>)[kRoute]!
    gate.counters.inFlight = release(gate.counters.inFlight)
  }

  /**
   * Tells the gate when the handler's work ends, for the two cases where `onResponse` does not:
   * after a client abort (Fastify then never runs `onResponse`) and after a handler timeout
   * (`onResponse` runs while the handler goes on).
   */
  function watchHandler (handler: Handler, waitsForHandler: boolean): Handler {
    return function admissionWatchedHandler (this: FastifyInstance, request, reply) {
      const result = handler.call(this, request, reply)
      const slots = request as unknown as Slots
      const flags = slots[kFlags]!
      if ((flags & HELD) === 0) return result
      if (isThenable(result)) {
        if (waitsForHandler) {
          slots[kFlags] = flags | STARTED | RUNNING
          const settle = (): void => {
            const now = slots[kFlags]! & ~RUNNING
            slots[kFlags] = now
            if ((now & (ENDED | ABORTED)) !== 0) free(request)
          }
          result.then(settle, settle)
          return result
        }
        if ((flags & ABORTED) !== 0) {
          const end = (): void => { free(request) }
          result.then(end, end)
        } else {
          (request as unknown as Record<symbol, unknown>)[kWork] = result
        }
      }
      slots[kFlags] = flags | STARTED
      return result
    }
  }

  function onAbort (request: FastifyRequest): void {
    const slots = request as unknown as Slots
    const flags = slots[kFlags]!
    if ((flags & HELD) === 0) return
    slots[kFlags] = flags | ABORTED
    if ((flags & RUNNING) !== 0) return
    const work = (request as unknown as Record<symbol, PromiseLike<unknown> | null>)[kWork]!
    if (work !== null) {
      const end = (): void => { free(request) }
      work.then(end, end)
      return
    }
    const reply = (request as unknown as Record<symbol, FastifyReply>)[kReply]!
    const gate = (request as unknown as Record<symbol, RouteGate>)[kRoute]!
    if (reply.sent || gate === unseen) {
      free(request)
      return
    }
    // The handler has not finished: it either has not started (and will, or an error reply is
    // sent first) or it answers later by callback. Either way the end is a call to `send`, which
    // Fastify still makes after an abort though it never runs `onResponse`. Patching this one
    // reply keeps an `onSend` hook off every other request's path.
    const send = reply.send
    reply.send = function admissionSendAfterAbort (this: FastifyReply, payload?: unknown) {
      free(request)
      return send.call(this, payload)
    }
  }

  function shed (request: FastifyRequest, reply: FastifyReply, counters: GateCounters, retrySeconds: number): void {
    global.shed++
    counters.shed++
    if (settings.onShed !== undefined) settings.onShed(request)
    refuse(reply, 503, retrySeconds, settings.responseBody, 'Server is at capacity')
  }

  fastify.addHook('onRequest', function admissionOnRequest (request, reply, next) {
    const gate = (request.routeOptions.config as unknown as Record<symbol, RouteGate | false | undefined>)[kGate] ?? unseen
    if (gate === false) { next(); return }
    const slots = request as unknown as Slots
    const counters = gate.counters
    let flags = 0
    if (maxInFlight !== 0) {
      const taken = acquire(global.inFlight, maxInFlight)
      if (!taken.ok) { shed(request, reply, counters, 1); return }
      global.inFlight = taken.n
      flags = HELD_GLOBAL
    }
    if (gate.maxInFlight !== 0) {
      const taken = acquire(counters.inFlight, gate.maxInFlight)
      if (!taken.ok) {
        if (flags !== 0) global.inFlight = release(global.inFlight)
        shed(request, reply, counters, 1)
        return
      }
      counters.inFlight = taken.n
    } else {
      counters.inFlight++
    }
    flags |= HELD_ROUTE
    slots[kFlags] = flags
    const fields = request as unknown as Record<symbol, unknown>
    fields[kRoute] = gate
    fields[kReply] = reply
    const limiter = gate.limiter
    if (limiter !== undefined) {
      let key: string
      if (keyOf === undefined) {
        key = clientKey(request.ip, subnet)
      } else {
        const chosen: unknown = keyOf(request)
        if (typeof chosen !== 'string') throw new AdmissionKeyError(chosen)
        key = chosen
      }
      const outcome = limiter.consume(key, monotonicMs(), gate.cost)
      if (outcome !== ADMITTED) {
        free(request)
        if (outcome === LIMITED) {
          global.limited++
          counters.limited++
          if (gate.policy !== undefined) reply.header('ratelimit-policy', gate.policy).header('ratelimit', rateLimitHeader(limiter))
          if (settings.onLimit !== undefined) settings.onLimit(request, limiter.retryMs)
          refuse(reply, settings.limitStatusCode, Math.ceil(limiter.retryMs / 1000), settings.responseBody, 'Rate limit exceeded')
        } else {
          shed(request, reply, counters, Math.ceil(limiter.retryMs / 1000))
        }
        return
      }
      if (gate.policy !== undefined) reply.header('ratelimit-policy', gate.policy).header('ratelimit', rateLimitHeader(limiter))
    }
    global.admitted++
    counters.admitted++
    next()
  })

  fastify.addHook('onResponse', function admissionOnResponse (request, _reply, next) {
    const slots = request as unknown as Slots
    const flags = slots[kFlags]!
    if ((flags & HELD) !== 0) {
      if ((flags & RUNNING) !== 0) slots[kFlags] = flags | ENDED
      else free(request)
    }
    next()
  })

  fastify.addHook('onRequestAbort', function admissionOnRequestAbort (request, next) {
    onAbort(request)
    next()
  })

  const stats = (): AdmissionStats => {
    const perRoute: Record<string, GateCounters> = {}
    for (const [name, gate] of routes) perRoute[name] = copyCounters(gate.counters)
    let identities = 0
    for (const limiter of limiters) identities += limiter.table.size
    return { ...copyCounters(global), identities, routes: perRoute }
  }
  if (!fastify.hasDecorator('admission')) fastify.decorate('admission', { stats })
  done()
}

export const admissionPlugin = fp(admission, { fastify: '5.x', name: 'fastify-admission' })
