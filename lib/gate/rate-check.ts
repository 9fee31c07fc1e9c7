import type { FastifyReply, FastifyRequest } from 'fastify'
import { clientKey } from './client-key.js'
import { AdmissionKeyError } from './errors.js'
import { rateLimitHeader } from './headers.js'
import { ADMITTED, SATURATED } from '../backends/memory/memory-limiter.js'
import type { Settings } from './options.js'
import type { RateDecision } from '../rates/decision.js'
import { RatesUnavailableError } from '../rates/errors.js'
import { refuse } from './refusal.js'
import type { GateCounters } from './stats.js'
import type { RouteGate } from './route-gate.js'
import type { Slots } from './permits.js'

type Next = (error?: Error) => void

/**
 * The second step of the gate: the client's quota. On the memory backend it decides on the
 * request's own path (no promise); on another backend it waits for one round trip.
 */
export class RateCheck {
  private readonly settings: Settings
  private readonly global: GateCounters
  private readonly slots: Slots
  private readonly clock: () => number

  constructor (settings: Settings, global: GateCounters, slots: Slots, clock: () => number) {
    this.settings = settings
    this.global = global
    this.slots = slots
    this.clock = clock
  }

  keyOf (request: FastifyRequest): string {
    const chosen = this.settings.key
    if (chosen === undefined) return clientKey(request.ip, this.settings.ipv6Subnet)
    const key: unknown = chosen(request)
    if (typeof key !== 'string') throw new AdmissionKeyError(key)
    return key
  }

  /** Runs the check; calls `next` when the request may go on, or answers it. */
  run (request: FastifyRequest, reply: FastifyReply, gate: RouteGate, next: Next): void {
    let key: string
    try {
      key = this.keyOf(request)
    } catch (error) {
      // Fastify answers 500; the request holds its slot but is not followed yet.
      this.slots.free(request)
      next(error as Error)
      return
    }
    const local = gate.local
    if (local !== undefined) {
      const now = this.clock()
      const verdict = local.consume(key, now, gate.cost)
      if (verdict === SATURATED) {
        this.unavailable(request, reply, gate, local.retryAfterMs, next)
        return
      }
      if (gate.policyHeader !== undefined) this.headers(reply, gate.policyHeader, local.remaining, local.resetAt, now)
      if (verdict === ADMITTED) this.admit(reply, gate, next)
      else this.limit(request, reply, gate, local.retryAfterMs)
      return
    }
    // The client may go away during the round trip: the slot follows the request from here.
    this.slots.follow(reply)
    const remote = gate.remote!
    remote.consume(key, gate.cost).then(
      (decision: RateDecision) => {
        if (gate.policyHeader !== undefined) this.headers(reply, gate.policyHeader, decision.remaining, decision.resetAt, this.clock())
        if (decision.allowed) this.admit(reply, gate, next)
        else this.limit(request, reply, gate, decision.retryAfterMs)
      },
      (error: unknown) => {
        if (error instanceof RatesUnavailableError) this.unavailable(request, reply, gate, error.retryAfterMs, next)
        else next(error as Error)
      }
    )
  }

  private headers (reply: FastifyReply, policy: string, remaining: number, resetAt: number, now: number): void {
    reply.header('ratelimit-policy', policy).header('ratelimit', rateLimitHeader(remaining, resetAt, now))
  }

  /**
   * Lets the request go on, its slot followed to the request's end (a remote check follows it
   * from before its round trip).
   */
  admit (reply: FastifyReply, gate: RouteGate, next: Next): void {
    if (gate.remote === undefined) this.slots.follow(reply)
    this.global.admitted++
    gate.counters.admitted++
    next()
  }

  private limit (request: FastifyRequest, reply: FastifyReply, gate: RouteGate, retryAfterMs: number): void {
    this.slots.free(request)
    this.global.limited++
    gate.counters.limited++
    if (this.settings.onLimit !== undefined) this.settings.onLimit(request, retryAfterMs)
    refuse(reply, this.settings.limitStatusCode, Math.ceil(retryAfterMs / 1000), this.settings.responseBody, 'Rate limit exceeded')
  }

  /**
   * The backend could not decide (Redis down or slow, or the memory backend full of live state).
   * Fail closed with 503 unless the application asked by name to admit; counted either way.
   */
  private unavailable (request: FastifyRequest, reply: FastifyReply, gate: RouteGate, retryAfterMs: number | undefined, next: Next): void {
    this.global.unavailable++
    gate.counters.unavailable++
    if (this.settings.onBackendError === 'allow') {
      this.admit(reply, gate, next)
      return
    }
    this.slots.free(request)
    this.shed(request, reply, gate, retryAfterMs === undefined ? 1 : Math.max(1, Math.ceil(retryAfterMs / 1000)))
  }

  /** A 503 for a full gate or an undecidable quota. */
  shed (request: FastifyRequest, reply: FastifyReply, gate: RouteGate, retrySeconds: number): void {
    this.global.shed++
    gate.counters.shed++
    if (this.settings.onShed !== undefined) this.settings.onShed(request)
    refuse(reply, 503, retrySeconds, this.settings.responseBody, 'Server is at capacity')
  }
}
