import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify'
import { ADMITTED, UNDECIDABLE } from '../rates/backend.js'
import type { RateDecision, StackDecision } from '../rates/decision.js'
import { AdmissionTierError } from './errors.js'
import { RatesError, RatesUnavailableError } from '../rates/errors.js'
import { decisions, publishDecision, refused } from '../metrics/events.js'
import { clientKey, gateKey } from './client-key.js'
import { rateLimitHeader } from './headers.js'
import type { Settings } from './options.js'
import type { Permits } from './permits.js'
import { describePolicy } from './policy-text.js'
import type { AllowMatcher } from './allow-list.js'
import { MESSAGES, type RefusalReason } from './problem.js'
import { refuse } from './refusal.js'
import { takeByPriority } from './priority.js'
import type { RouteGate } from './route-gate.js'
import type { GateCounters } from './stats.js'

export type Next = (error?: Error) => void

/** What `screen` says of a client on the allow list. */
const ALLOWED = Symbol('allowed')

/**
 * The second step of the gate: the client's quota. On a backend with synchronous decisions
 * (memory) it decides on the request's own path, with no promise; on another (Redis) it waits
 * for one round trip. Whatever the backend does wrong — it cannot decide, it finds another
 * policy at the quota's address, it answers nonsense, it throws — the request is answered by
 * `onBackendError`, counted as `unavailable`, and logged once per route until a decision succeeds.
 */
export class RateCheck {
  protected readonly settings: Settings
  protected readonly global: GateCounters
  protected readonly permits: Permits
  protected readonly log: FastifyBaseLogger
  /** The registration's address, for decision events. */
  protected readonly registration: string
  /** A backend that cannot decide admits: `onBackendError: 'allow'`, or a check that never refuses. */
  protected readonly failOpen: boolean

  constructor (settings: Settings, global: GateCounters, permits: Permits, log: FastifyBaseLogger, registration: string, failOpen = settings.onBackendError === 'allow') {
    this.settings = settings
    this.global = global
    this.permits = permits
    this.log = log
    this.registration = registration
    this.failOpen = failOpen
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
    this.decide(request, reply, gate, key, next)
  }

  /** `run` with an allow list: a client on it goes on, taking nothing from its quota and getting no headers. */
  runAllowing (request: FastifyRequest, reply: FastifyReply, gate: RouteGate, allows: AllowMatcher, next: Next): void {
    const key = this.screen(request, allows, next)
    if (key === ALLOWED) this.allowed(request, gate, next)
    else if (key !== undefined) this.decide(request, reply, gate, key, next)
  }

  /**
   * The allow list before shedding (`allowListSkipsShedding`): a client on it goes on even when
   * the gate is full (holding a permit when one is free, so that the gauge counts it); any other
   * is shed or checked as usual, with the key already made.
   */
  runAllowingFirst (request: FastifyRequest, reply: FastifyReply, gate: RouteGate, allows: AllowMatcher, next: Next): void {
    const key = this.screen(request, allows, next)
    if (key === undefined) return
    const held = takeByPriority(this.permits, request, reply, gate)
    if (key === ALLOWED) {
      this.allowed(request, gate, next)
      return
    }
    if (!held && !this.whenFull(request, reply, gate, next)) return
    if (gate.limiter === undefined) this.admit(request, gate, next, key)
    else this.decide(request, reply, gate, key, next)
  }

  /**
   * The client's key, or `ALLOWED` when the allow list has the client; undefined when the
   * application's `key` or `allowList` threw: Fastify answers 500 and the permit (if any) goes back.
   */
  private screen (request: FastifyRequest, allows: AllowMatcher, next: Next): string | typeof ALLOWED | undefined {
    try {
      const key = this.keyOf(request)
      return allows(request, key) ? ALLOWED : key
    } catch (error) {
      this.permits.free(request)
      next(error as Error)
      return undefined
    }
  }

  /** Decides on the client's quota by its key (with tiers, on the quota of the request's tier). */
  decide (request: FastifyRequest, reply: FastifyReply, route: RouteGate, key: string, next: Next): void {
    const gate = route.tiers === undefined ? route : this.tierOf(request, route, next)
    if (gate === undefined) return
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
      else this.limit(request, reply, gate, synchronous.retryAfterMs, next, key)
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
        if (gate.policyHeader !== undefined) this.headers(reply, gate, decision.remaining, decision.resetAt, Date.now(), decision)
        if (decision.allowed) this.admit(request, gate, next, key)
        else this.limit(request, reply, gate, decision.retryAfterMs, next, key)
      },
      (error: unknown) => { this.failed(request, reply, gate, error, undefined, next, key) }
    )
  }

  /** The gate of the request's tier; undefined when `tier(request)` threw or named no tier (Fastify answers 500, the permit goes back). */
  private tierOf (request: FastifyRequest, route: RouteGate, next: Next): RouteGate | undefined {
    const tiers = route.tiers!
    let name: unknown
    try {
      name = tiers.tier(request)
    } catch (error) {
      this.permits.free(request)
      next(error as Error)
      return undefined
    }
    const gate = typeof name === 'string' ? tiers.gates.get(name) : undefined
    if (gate === undefined) {
      this.permits.free(request)
      next(new AdmissionTierError(name, [...tiers.gates.keys()]))
    }
    return gate
  }

  private headers (reply: FastifyReply, gate: RouteGate, remaining: number, resetAt: number, now: number, decision?: RateDecision): void {
    const stacked = gate.stacked
    reply.header('ratelimit-policy', gate.policyHeader).header('ratelimit', stacked === undefined
      ? rateLimitHeader(remaining, gate.quota, resetAt, now, gate.rateLimitStart)
      : stacked.rateLimitHeader(now, decision as StackDecision | undefined))
  }

  /** Lets the request go on (it holds its permits until its work ends). */
  admit (request: FastifyRequest, gate: RouteGate, next: Next, key?: string, backendFailed = false): void {
    if (gate.failures !== undefined && key !== undefined) gate.failures.attempted(request, key)
    this.global.admitted++
    gate.counters.admitted++
    if (decisions.hasSubscribers) publishDecision(this.registration, request, gate.name, 'admitted', undefined, undefined, key, backendFailed)
    next()
  }

  /** An allowed client goes on (it holds its permits until its work ends). */
  allowed (request: FastifyRequest, gate: RouteGate, next: Next, key?: string): void {
    this.global.allowed++
    gate.counters.allowed++
    this.admit(request, gate, next, key)
  }

  protected limit (request: FastifyRequest, reply: FastifyReply, gate: RouteGate, retryAfterMs: number, next: Next, key: string): void {
    this.permits.free(request)
    this.global.limited++
    gate.counters.limited++
    if (this.settings.onLimit !== undefined) this.settings.onLimit(request, retryAfterMs)
    const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000))
    refused(this.registration, request, gate.name, 'limited', this.settings.limitStatusCode, seconds, key, false)
    this.answer(request, reply, next, gate, this.settings.limitStatusCode, seconds, 'limited')
  }

  /** Sends a refusal: the built-in JSON or text body (a subclass sends others). */
  protected answer (_request: FastifyRequest, reply: FastifyReply, _next: Next, _gate: RouteGate, status: 429 | 503, retrySeconds: number, reason: RefusalReason, message = MESSAGES[reason]): void {
    refuse(reply, status, retrySeconds, this.settings.responseBody as 'json' | 'text', message)
  }

  /**
   * The backend could not decide. Fail closed with 503 unless the application asked by name to
   * admit; counted either way; logged once (the first failure after a success), at `error`, with
   * the route and the policy in the application's terms — never in the response.
   */
  protected failed (request: FastifyRequest, reply: FastifyReply, gate: RouteGate, error: unknown, retryAfterMs: number | undefined, next: Next, key: string): void {
    this.global.unavailable++
    gate.counters.unavailable++
    if (!gate.failing) {
      gate.failing = true
      this.log.error({
        route: gate.name,
        policy: describePolicy(gate.policy!),
        code: error instanceof RatesError ? error.code : error === undefined ? 'RATES_UNAVAILABLE' : undefined,
        err: error
      }, `fastify-admission: the rate-limit backend could not decide for ${gate.name} (${error === undefined ? 'every tracked client has live state' : error instanceof Error ? error.message : String(error)}); ${this.failOpen === (this.settings.onBackendError === 'allow') ? `answering by onBackendError '${this.settings.onBackendError}'` : 'admitting (enforce: false)'} until it can`)
    }
    if (this.failOpen) {
      this.admit(request, gate, next, key, true)
      return
    }
    this.permits.free(request)
    const wait = retryAfterMs ?? (error instanceof RatesUnavailableError ? error.retryAfterMs : undefined)
    const seconds = wait === undefined ? 1 : Math.max(1, Math.ceil(wait / 1000))
    refused(this.registration, request, gate.name, 'unavailable', 503, seconds, key, true)
    this.answer(request, reply, next, gate, 503, seconds, 'unavailable')
  }

  /** A full in-flight gate: whether the request goes on anyway (never, here: it is shed). */
  whenFull (request: FastifyRequest, reply: FastifyReply, gate: RouteGate, next: Next): boolean {
    this.shed(request, reply, gate, next)
    return false
  }

  /**
   * A 503 for a full in-flight gate (`Retry-After` from the permits: 1, or the adaptive limit's
   * measured latency), or for pressure (its own `Retry-After` and message).
   */
  shed (request: FastifyRequest, reply: FastifyReply, gate: RouteGate, next: Next, retrySeconds = this.permits.retryAfter(), message?: string): void {
    this.global.shed++
    gate.counters.shed++
    if (this.settings.onShed !== undefined) this.settings.onShed(request)
    refused(this.registration, request, gate.name, 'shed', 503, retrySeconds, undefined, false)
    this.answer(request, reply, next, gate, 503, retrySeconds, 'shed', message)
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
