import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import type { PressureStatus } from '../pressure/pressure.js'
import type { BackendLimiter, RatesBackend } from '../rates/backend.js'
import { RatesInvalidArgumentError } from '../rates/errors.js'
import type { RouteGate } from './route-gate.js'
import { copyCounters, type AdmissionStats, type GateCounters } from './stats.js'

/**
 * A quota's registry of client states (the card's registry of `LimBkt` values): what the backend
 * stores for a client, by the client's key. `key` is what the `key` option returns for the
 * client, or its address when there is no `key` option (IPv6 grouped as the gate groups it).
 */
export interface AdmissionRegistry {
  /**
   * The client's state, or undefined when it has none (it is at full capacity). For a token
   * bucket, the core's `Bucket` `{ tokens, last }`: `tokens` in 1/`windowMs` of a token (divide by
   * `windowMs` for tokens), `last` the backend's clock in ms (memory: this process's monotonic
   * epoch ms; Redis: the server's time). Other algorithms: their kernel's state (see `fastify-admission/core`).
   */
  get (key: string): Promise<unknown>
  /** Forgets the client's state, so it starts fresh (e.g. after a successful login); true when it had one. */
  delete (key: string): Promise<boolean>
}

/** What each registration decorates: `fastify.admission` in the context it was registered in (and below). */
export interface AdmissionDecorator {
  /** Where the registration sits; every quota's address starts with it. */
  readonly address: string
  /** A snapshot of the counters. */
  stats (): AdmissionStats
  /**
   * The global in-flight limit now, for metrics: `maxInFlight` as given, or the adaptive limit's
   * current value (it moves with the measured latency); `false` without a global gate.
   */
  readonly limit: number | false
  /** The registry of the quota that routes without a `rateLimit` of their own share. */
  readonly registry: AdmissionRegistry
  /** The registry of a route's quota (its own, or the shared one), by `METHOD /url` as in `stats().routes`; undefined for a route without one. */
  registryOf (route: string): AdmissionRegistry | undefined
  /**
   * A `preHandler` for `setNotFoundHandler`: requests that match no route pass no hook of this
   * plugin unless the application wires this one. They take from the shared quota and are refused
   * while the in-flight gate is full, holding no in-flight permit (a 404 does no work to protect).
   */
  readonly notFound: (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void
  /**
   * Whether the server is under pressure and why (which signal, its value, its limit), the
   * readings and the queueing-delay controller's state; undefined without `pressure` or `queueDelay`.
   */
  pressure (): PressureStatus | undefined
}

const kDecorator = Symbol.for('fastify-admission.decorator')

/**
 * Sets `fastify.admission` for the context of a registration. Fastify forbids decorating a name
 * twice along a chain of contexts, so the first registration defines a getter that reads the
 * nearest registration's decorator (an own symbol property of each registering context).
 */
export function decorateAdmission (fastify: FastifyInstance, decorator: AdmissionDecorator): void {
  const context = fastify as unknown as Record<symbol, AdmissionDecorator | undefined>
  // Two registrations in one context: the first keeps `fastify.admission`.
  if (Object.prototype.hasOwnProperty.call(context, kDecorator)) return
  context[kDecorator] = decorator
  if (!fastify.hasDecorator('admission')) {
    fastify.decorate('admission', {
      getter (this: FastifyInstance): AdmissionDecorator { return (this as unknown as Record<symbol, AdmissionDecorator>)[kDecorator]! }
    })
  }
}

export function registryOver (limiter: BackendLimiter | undefined, keyOf: (key: string) => string): AdmissionRegistry {
  return Object.freeze({
    get: async (key: string) => limiter === undefined ? undefined : await limiter.state(keyOf(checkedKey(key))),
    delete: async (key: string) => limiter === undefined ? false : await limiter.delete(keyOf(checkedKey(key)))
  })
}

function checkedKey (key: unknown): string {
  if (typeof key !== 'string') throw new RatesInvalidArgumentError('key', 'a client key (a string)', key)
  return key
}

export function statsOf (global: GateCounters, gates: Iterable<RouteGate>, backend: RatesBackend, limit: number): AdmissionStats {
  const routes: Record<string, GateCounters> = {}
  for (const gate of gates) routes[gate.name] = copyCounters(gate.counters)
  return { ...copyCounters(global), limit: limit === 0 ? false : limit, identities: backend.identities ?? 0, routes }
}
