import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify'
import { ADMITTED, UNDECIDABLE } from '../rates/backend.js'
import type { RateDecision } from '../rates/decision.js'
import { RatesError, RatesUnavailableError } from '../rates/errors.js'
import { decisions, publishDecision, refused } from '../metrics/events.js'
import { clientKey, gateKey } from './client-key.js'
import { rateLimitHeader } from './headers.js'
import type { Settings } from './options.js'
import type { Permits } from './permits.js'
import { describePolicy } from './policy-text.js'
import { refuse } from './refusal.js'
import type { RouteGate } from './route-gate.js'
import type { GateCounters } from './stats.js'

type Next = (error?: Error) => void

/**
 * The second step of the gate: the client's quota. On a backend with synchronous decisions
 * (memory) it decides on the request's own path, with no promise; on another (Redis) it waits
 * for one round trip. Whatever the backend does wrong — it cannot decide, it finds another
 * policy at the quota's address, it answers nonsense, it throws — the request is answered by
 * `onBackendError`, counted as `unavailable`, and logged once per route until a decision succeeds.
 */
export class RateCheck {
  private readonly settings: Settings
  private readonly global: GateCounters
  private readonly permits: Permits
  private readonly log: FastifyBaseLogger
  /** The registration's address, for decision events. */
  private readonly registration: string

  constructor (settings: Settings, global: GateCounters, permits: Permits, log: FastifyBaseLogger, registration: string) {
    this.settings = settings
    this.global = global
    this.permits = permits
    this.log = log
    this.registration = registration
  }

  /** The client's key for the quotas: the option's `key(request)`, or the address. */
  keyOf (request: FastifyRequest): string {
    const chosen = this.settings.key
    if (chosen === undefined) return clientKey(request.ip, this.settings.ipv6Subnet)
    return gateKey(chosen(request))
  }

  /** Runs the check on a gate with a limiter; calls `next` when the request may go on, or answers it. */
  run (request: FastifyRequest, reply: FastifyReply, gate: RouteGate, next: Next): void {
    let key: string
    try {
      key = this.keyOf(request)
    } catch (error) {
      // Fastify answers 500 (the application's `key` is wrong); the permit goes back now.
      this.permits.free(request)
      next(error as Error)
      return
    }
    const synchronous = gate.synchronous
    if (synchronous !== undefined) {
      const verdict = synchronous.decide(key, gate.cost)
      if (verdict === UNDECIDABLE) {
        this.failed(request, reply, gate, undefined, synchronous.retryAfterMs, next, key)
        return
      }
      if (gate.failing) gate.failing = false
      if (gate.policyHeader !== undefined) this.headers(reply, gate, synchronous.remaining, synchronous.resetAt, synchronous.decidedAt)
      if (verdict === ADMITTED) this.admit(request, gate, next, key)
      else this.limit(request, reply, gate, synchronous.retryAfterMs, key)
      return
    }
    let pending: Promise<RateDecision>
    try {
      pending = gate.limiter!.consume(key, gate.cost)
    } catch (error) {
      // A custom backend that throws instead of rejecting.
      this.failed(request, reply, gate, error, undefined, next, key)
      return
    }
    Promise.resolve(pending).then(
      (decision: RateDecision) => {
        if (!isDecision(decision)) {
          this.failed(request, reply, gate, new RatesUnavailableError(`the backend answered ${typeof decision === 'object' ? 'an object that is not a decision' : `a ${typeof decision}`}`), undefined, next, key)
          return
        }
        if (gate.failing) gate.failing = false
        // A remote decision carries the backend's clock in `resetAt`: its distance from the
        // decision is what the header reports, and the local clock is no worse a reference.
        if (gate.policyHeader !== undefined) this.headers(reply, gate, decision.remaining, decision.resetAt, Date.now())
        if (decision.allowed) this.admit(request, gate, next, key)
        else this.limit(request, reply, gate, decision.retryAfterMs, key)
      },
      (error: unknown) => { this.failed(request, reply, gate, error, undefined, next, key) }
    )
  }

  private headers (reply: FastifyReply, gate: RouteGate, remaining: number, resetAt: number, now: number): void {
    reply.header('ratelimit-policy', gate.policyHeader).header('ratelimit', rateLimitHeader(remaining, gate.quota, resetAt, now))
  }

  /** Lets the request go on (it holds its permits until its work ends). */
  admit (request: FastifyRequest, gate: RouteGate, next: Next, key?: string, backendFailed = false): void {
    this.global.admitted++
    gate.counters.admitted++
    if (decisions.hasSubscribers) publishDecision(this.registration, request, gate.name, 'admitted', undefined, undefined, key, backendFailed)
    next()
  }

  private limit (request: FastifyRequest, reply: FastifyReply, gate: RouteGate, retryAfterMs: number, key: string): void {
    this.permits.free(request)
    this.global.limited++
    gate.counters.limited++
    if (this.settings.onLimit !== undefined) this.settings.onLimit(request, retryAfterMs)
    const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000))
    refused(this.registration, request, gate.name, 'limited', this.settings.limitStatusCode, seconds, key, false)
    refuse(reply, this.settings.limitStatusCode, seconds, this.settings.responseBody, 'Rate limit exceeded')
  }

  /**
   * The backend could not decide. Fail closed with 503 unless the application asked by name to
   * admit; counted either way; logged once (the first failure after a success), at `error`, with
   * the route and the policy in the application's terms — never in the response.
   */
  private failed (request: FastifyRequest, reply: FastifyReply, gate: RouteGate, error: unknown, retryAfterMs: number | undefined, next: Next, key: string): void {
    this.global.unavailable++
    gate.counters.unavailable++
    if (!gate.failing) {
      gate.failing = true
      this.log.error({
        route: gate.name,
        policy: describePolicy(gate.policy!),
        code: error instanceof RatesError ? error.code : error === undefined ? 'RATES_UNAVAILABLE' : undefined,
        err: error
      }, `fastify-admission: the rate-limit backend could not decide for ${gate.name} (${error === undefined ? 'every tracked client has live state' : error instanceof Error ? error.message : String(error)}); answering by onBackendError '${this.settings.onBackendError}' until it can`)
    }
    if (this.settings.onBackendError === 'allow') {
      this.admit(request, gate, next, key, true)
      return
    }
    this.permits.free(request)
    const wait = retryAfterMs ?? (error instanceof RatesUnavailableError ? error.retryAfterMs : undefined)
    const seconds = wait === undefined ? 1 : Math.max(1, Math.ceil(wait / 1000))
    refused(this.registration, request, gate.name, 'unavailable', 503, seconds, key, true)
    refuse(reply, 503, seconds, this.settings.responseBody, 'Service temporarily unavailable')
  }

  /**
   * A 503 for a full in-flight gate (`Retry-After` from the permits: 1, or the adaptive limit's
   * measured latency), or for pressure (its own `Retry-After` and message).
   */
  shed (request: FastifyRequest, reply: FastifyReply, gate: RouteGate, retrySeconds = this.permits.retryAfter(), message = 'Server is at capacity'): void {
    this.global.shed++
    gate.counters.shed++
    if (this.settings.onShed !== undefined) this.settings.onShed(request)
    refused(this.registration, request, gate.name, 'shed', 503, retrySeconds, undefined, false)
    refuse(reply, 503, retrySeconds, this.settings.responseBody, message)
  }
}

/** A decision as the backend contract describes it: checked, since a custom backend may get it wrong. */
function isDecision (value: unknown): value is RateDecision {
  if (typeof value !== 'object' || value === null) return false
  const d = value as { allowed?: unknown, remaining?: unknown, resetAt?: unknown, retryAfterMs?: unknown }
  return (d.allowed === true || (d.allowed === false && typeof d.retryAfterMs === 'number' && Number.isSafeInteger(d.retryAfterMs) && d.retryAfterMs >= 0)) &&
    typeof d.remaining === 'number' && Number.isSafeInteger(d.remaining) &&
    typeof d.resetAt === 'number' && Number.isSafeInteger(d.resetAt)
}
