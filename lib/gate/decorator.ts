import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { AdmissionError } from './errors.js'
import type { PressureStatus } from '../pressure/pressure.js'
import type { RatesBackend } from '../rates/backend.js'
import type { AdmissionRegistry } from './registry.js'
import type { RouteGate } from './route-gate.js'
export type { AdmissionRegistry } from './registry.js'
import { copyCounters, type AdmissionStats, type GateCounters, type RouteStats } from './stats.js'
import { attemptsOf, type RetryCounters } from '../metrics/counters.js'
import { reasonRecord, type ReasonCounts } from '../metrics/reasons.js'
import { oldestPermitMs } from './release/held-permits.js'
import type { PlanListing } from './plan/plan.js'

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
   * A route's plan, by `METHOD /url` as in `stats().routes` (`'404'` for `notFound`): the steps its
   * requests run, by name and in order, in `onRequest` and in `preHandler` (a tier's under its
   * name). Undefined for a route this registration does not gate (opted out, or not planned yet: a
   * route declared before the plugin is planned at its first request).
   */
  plan (route: string): PlanListing | undefined
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
 * A second registration in a context that has one: refused. Both would gate the context's routes,
 * and a client would be told one registration's quota in its `RateLimit` fields and refused by the
 * other's; the second's counters would be out of reach (`fastify.admission` is the first's).
 */
export function checkOnePerContext (fastify: FastifyInstance): void {
  const registered = (fastify as unknown as Record<symbol, AdmissionDecorator | undefined>)[kDecorator]
  if (registered === undefined || !Object.prototype.hasOwnProperty.call(fastify, kDecorator)) return
  throw new AdmissionError('ADMISSION_DUPLICATE_REGISTRATION', `fastify-admission is registered twice in one context (at ${JSON.stringify(registered.address)}): a client would be told one registration's quota and refused by the other's. Register it once there with every setting (a route's own limits go in its config.admission), or register the second in a child context (app.register(async (child) => { … })) to gate that context's routes apart`)
}

/**
 * Sets `fastify.admission` for the context of a registration. Fastify forbids decorating a name
 * twice along a chain of contexts, so the first registration defines a getter that reads the
 * nearest registration's decorator (an own symbol property of each registering context).
 */
export function decorateAdmission (fastify: FastifyInstance, decorator: AdmissionDecorator): void {
  const context = fastify as unknown as Record<symbol, AdmissionDecorator | undefined>
  context[kDecorator] = decorator
  if (!fastify.hasDecorator('admission')) {
    fastify.decorate('admission', {
      getter (this: FastifyInstance): AdmissionDecorator { return (this as unknown as Record<symbol, AdmissionDecorator>)[kDecorator]! }
    })
  }
}

export function statsOf (global: GateCounters, gates: Iterable<RouteGate>, backend: RatesBackend, limit: number, retries: RetryCounters | undefined): AdmissionStats {
  const routes: Record<string, RouteStats> = {}
  const reasons: ReasonCounts[] = []
  for (const gate of gates) {
    routes[gate.name] = { ...copyCounters(gate.counters), oldestPermitMs: oldestPermitMs(gate), reasons: reasonRecord([gate.reasons]) }
    reasons.push(gate.reasons)
  }
  const stats: AdmissionStats = { ...copyCounters(global), limit: limit === 0 ? false : limit, identities: backend.identities ?? 0, reasons: reasonRecord(reasons), routes }
  if (retries !== undefined) {
    stats.attempts = attemptsOf(global, retries)
  }
  return stats
}
