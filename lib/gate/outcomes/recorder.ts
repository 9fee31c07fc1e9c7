import type { FastifyBaseLogger, FastifyRequest } from 'fastify'
import { Contained } from '../../callbacks/contained.js'
import { DECISION_CHANNEL, decisions, publishDecision, refused } from '../../metrics/events.js'
import type { GateCounters, RetryCounters } from '../../metrics/counters.js'
import { countReason, SHED_REASONS, type Reason } from '../../metrics/reasons.js'
import type { ShedReason } from '../../pressure/pressure.js'
import type { StackDecision } from '../../rates/decision.js'
import { RatesError, RatesUnavailableError } from '../../rates/errors.js'
import { describePolicy } from '../options/policy-text.js'
import { inFlightFields, type Expose, type InFlightPolicyName } from '../headers/rate-limit-fields.js'
import type { Permit } from '../release/permit.js'
import type { OnLimit } from '../options/option-types.js'
import type { Slots } from '../release/slots.js'
import type { Refuse } from './refusal-styles.js'
import { kGateRefusal, MESSAGES, retrySeconds, type RefusalReason } from './refusal-text.js'


/** How a route sends each kind of refusal: through Fastify's reply, from precomputed bytes, or by the application's builder. */
export type Refusals = Readonly<Record<RefusalReason, Refuse>>

/** What every route's outcomes share: the registration's counters, callbacks and logger. */
export interface OutcomeContext {
  readonly global: GateCounters
  readonly slots: Slots
  /** The registration's bound on long-lived connections (`maxLongLived`), 0 for none. */
  readonly longLivedLimit: number
  readonly log: FastifyBaseLogger
  /** The registration's address, for decision events. */
  readonly registration: string
  readonly limitStatusCode: 429 | 503
  readonly onLimit: OnLimit | undefined
  readonly onShed: ((request: FastifyRequest) => void) | undefined
  /** Makes an answer readable by pages of other origins: `Retry-After` and the fields of the formats sent. */
  readonly expose: Expose
  /** Outcomes of the requests that said they were retries (`retries` on), or undefined. */
  readonly retries: RetryCounters | undefined
  /** Told each client key refused for what the client did (its quota, its in-flight limit): the top offenders' sketch, or undefined when off. */
  readonly offenders: ((key: string) => void) | undefined
}

/** What one route's outcomes are made with. */
export interface RouteOutcomes {
  /** The route's name (`METHOD /url`), for the logs. */
  readonly route: string
  readonly enforce: boolean
  readonly onBackendError: 'deny' | 'allow'
  /** How each kind of refusal is sent. */
  readonly refusals: Refusals
  /** A full gate's 503 carries the in-flight policy's `RateLimit` fields (draft 11 is sent). */
  readonly inFlightHeaders: boolean
  /** Login throttling (`count: 'failures'`): what its quota refuses, failed logins did. */
  readonly login: boolean
  /** `Retry-After` of the route's own full semaphore, when not the gate's (`retryAfter: 'observed'`). */
  readonly routeWait?: ((permit: Permit) => number) | undefined
}

/**
 * Where a route's outcomes are recorded — admitted, limited, shed, unavailable, would-limit,
 * would-shed — in one place: the counters (the route's gate and the registration's), the log line,
 * the diagnostics event, the application's `onLimit`/`onShed`, and the refusal itself. Whether a
 * full gate or an empty quota refuses (`enforce`) and how each kind of refusal is sent (`refusals`) are data.
 *
 * `enforce: false` (shadow mode, a dry run): the quota decides and the headers are set as
 * configured, but nothing is refused: what would have been is counted (`wouldLimit`,
 * `wouldShed`), logged at `info` on the request's logger, and goes on; a backend that cannot
 * decide admits. `onLimit` and `onShed` are not called: nothing was limited or shed.
 *
 * Each refusal is counted by its reason (which step refused: `Reason`) on the gate that refused it,
 * and a client refused for what it did is told to the top offenders' sketch.
 *
 * `onLimit`, `onShed` and the decision channel's subscribers are told inside the error boundary
 * (`Contained`, one each for the route): whatever they throw or reject with is logged once, and
 * the request is answered as it would have been without them.
 */
export class Outcomes {
  private readonly context: OutcomeContext
  private readonly enforce: boolean
  private readonly refusals: Refusals
  private readonly onBackendError: 'deny' | 'allow'
  /** A backend that cannot decide admits: `onBackendError: 'allow'`, or a gate that never refuses. */
  private readonly failOpen: boolean
  private readonly login: boolean
  private readonly offender: (key: string) => void
  private readonly onLimitCalls: Contained
  private readonly onShedCalls: Contained
  private readonly subscriberCalls: Contained

  /**
   * A full gate's 503 carries the in-flight policy's `RateLimit` fields: in draft 11's format only,
   * whose `qu="concurrent-requests"` says the quota is the server's concurrency, not the client's
   * (the older formats have no way to say it: their `limit=1` would read as the client's quota).
   */
  private readonly inFlightHeaders: boolean
  // The fields of the last limit advertised, per name (an adaptive limit moves now and then, not per request).
  private readonly fieldsByName = new Map<InFlightPolicyName, { limit: number, policy: string, rateLimit: string }>()

  /** `Retry-After` of the route's own full semaphore: its observed wait (`retryAfter: 'observed'`), or the gate's. */
  private readonly routeWait: (permit: Permit) => number

  constructor (context: OutcomeContext, { route, enforce, onBackendError, refusals, inFlightHeaders, login, routeWait }: RouteOutcomes) {
    this.context = context
    this.routeWait = routeWait ?? (() => context.slots.retryAfter)
    this.inFlightHeaders = inFlightHeaders
    this.enforce = enforce
    this.onBackendError = onBackendError
    this.refusals = refusals
    this.failOpen = !enforce || onBackendError === 'allow'
    this.login = login
    // Without the sketch, nothing to tell: no test on the refusal's path.
    this.offender = context.offenders ?? nothing
    const log = context.log
    this.onLimitCalls = new Contained(log, 'onLimit', route, 'the request is refused as without it')
    this.onShedCalls = new Contained(log, 'onShed', route, 'the request is shed as without it')
    this.subscriberCalls = new Contained(log, `a subscriber of ${DECISION_CHANNEL}`, route, 'the decision stands, and the other subscribers hear it', false)
    const retries = context.retries
    const admit = this.admit
    this.admitted = retries === undefined
      ? admit
      : (permit) => {
          if (permit.retry) retries.admitted++
          admit(permit)
        }
  }

  /** The request goes on (it holds its permit until its work ends); with `retries`, a retry is counted apart too. */
  readonly admitted: (permit: Permit) => void

  private readonly admit = (permit: Permit): void => {
    this.context.global.admitted++
    permit.gate.counters.admitted++
    if (decisions.hasSubscribers) publishDecision(this.subscriberCalls, this.context.registration, permit.request, permit.gate.name, 'admitted', undefined, undefined, undefined, permit.key, permit.backendFailed)
    permit.done()
  }

  /** The allow list let the client past the quota. */
  readonly allowed = (permit: Permit): void => {
    this.context.global.allowed++
    permit.gate.counters.allowed++
    this.admitted(permit)
  }

  /** The client's quota is empty: refused; or, not enforcing, a would-limit that goes on (true). */
  limited (permit: Permit): boolean {
    const retryAfterMs = permit.retryAfterMs
    if (!this.enforce) {
      this.context.global.wouldLimit++
      permit.gate.counters.wouldLimit++
      this.wouldHave(permit, 'limited', retrySeconds(retryAfterMs))
      return true
    }
    permit.refused()
    this.context.global.limited++
    permit.gate.counters.limited++
    this.offender(permit.key!)
    const onLimit = this.context.onLimit
    if (onLimit !== undefined) this.onLimitCalls.notify(onLimit, permit.request, retryAfterMs, permit.key as string)
    this.answer(permit, this.context.limitStatusCode, retrySeconds(retryAfterMs), 'limited', false, MESSAGES.limited, violatedBy(permit), this.login ? 'login-failures' : violatedReason(permit))
    return false
  }

  /** An in-flight gate is full: the request is shed (or, not enforcing, goes on holding no slot: true). */
  full (permit: Permit): boolean {
    const route = permit.route
    const slots = this.context.slots
    // The route's own limit when it is the one that is full; else the registration's (a fleet's share, when that is what bounds it).
    const own = route.maxInFlight !== 0 && route.counters.inFlight >= route.maxInFlight
    if (own) return this.atBound(permit, 'route-in-flight', route.maxInFlight, this.routeWait(permit), 'route-in-flight')
    return this.atBound(permit, 'in-flight', slots.limit, slots.retryAfter, slots.fleetBound ? 'fleet-in-flight' : 'in-flight')
  }

  /**
   * The client holds `limit` requests in flight already (`clientInFlight`): refused as a quota is
   * (`limitStatusCode`, counted as limited, `onLimit` told), with `Retry-After: 1` — when one of its
   * requests ends is not known — and the `client-in-flight` policy's fields; or, not enforcing, a
   * would-limit that goes on holding no client slot (true).
   */
  clientFull (permit: Permit, limit: number): boolean {
    if (!this.enforce) {
      this.context.global.wouldLimit++
      permit.gate.counters.wouldLimit++
      this.wouldHave(permit, 'limited', 1)
      return true
    }
    permit.refused()
    this.context.global.limited++
    permit.gate.counters.limited++
    this.offender(permit.key!)
    if (this.inFlightHeaders) {
      const fields = this.fieldsOf('client-in-flight', limit)
      permit.reply.header('ratelimit-policy', fields.policy).header('ratelimit', fields.rateLimit)
    }
    const onLimit = this.context.onLimit
    if (onLimit !== undefined) this.onLimitCalls.notify(onLimit, permit.request, 1000, permit.key as string)
    this.answer(permit, this.context.limitStatusCode, 1, 'limited', false, MESSAGES.limited, POLICY_LISTS['client-in-flight'], 'client-in-flight')
    return false
  }

  /**
   * A retry finds a gate within the slots kept for first attempts (`retries.reserve`): shed as at a
   * full gate, naming the route's own limit (`own`) or the registration's.
   */
  fullForRetries (permit: Permit, own: boolean): boolean {
    const slots = this.context.slots
    return this.atBound(permit, own ? 'route-in-flight' : 'in-flight', own ? permit.route.maxInFlight : slots.limit, slots.retryAfter, own ? 'route-retry-reserve' : 'retry-reserve')
  }

  /**
   * The long-lived connections are full (the registration's `maxLongLived`, or the route's): the
   * request is shed with its policy named (or, not enforcing, goes on holding no place among them: true).
   */
  fullLongLived (permit: Permit): boolean {
    const route = permit.route
    const own = route.maxLongLived !== 0 && route.counters.longLived >= route.maxLongLived
    const name = own ? 'route-long-lived' : 'long-lived'
    return this.atBound(permit, name, own ? route.maxLongLived : this.context.longLivedLimit, 1, name)
  }

  /** A bound on concurrency (`name`, at `limit`) is reached: a 503 carrying its policy, or, not enforcing, a would-shed that goes on (true). */
  private atBound (permit: Permit, name: InFlightPolicyName, limit: number, seconds: number, reason: Reason): boolean {
    if (this.enforce) {
      if (this.inFlightHeaders) {
        const fields = this.fieldsOf(name, limit)
        permit.reply.header('ratelimit-policy', fields.policy).header('ratelimit', fields.rateLimit)
      }
      this.shed(permit, seconds, MESSAGES.shed, reason, name)
      return false
    }
    this.context.global.wouldShed++
    permit.gate.counters.wouldShed++
    this.wouldHave(permit, 'shed', 1)
    return true
  }

  /** A 503 for a full gate (named by its policy), or for pressure (its own `Retry-After` and message), for `reason`. */
  shed (permit: Permit, seconds: number, message: string, reason: Reason, policy?: InFlightPolicyName): void {
    permit.refused()
    this.context.global.shed++
    permit.gate.counters.shed++
    if (permit.retry) this.context.retries!.shed++
    const onShed = this.context.onShed
    if (onShed !== undefined) this.onShedCalls.notify(onShed, permit.request)
    this.answer(permit, 503, seconds, 'shed', false, message, policy === undefined ? NONE : POLICY_LISTS[policy], reason)
  }

  /** A 503 of pressure or queueing delay (`why`), with its own `Retry-After` and message. */
  readonly shedByPressure = (permit: Permit, seconds: number, message: string, why: ShedReason): void => {
    this.shed(permit, seconds, message, SHED_REASONS[why])
  }

  /**
   * The backend could not decide. Fail closed with 503 unless the application asked by name to
   * admit (then the request goes on as admitted, with no decision: true); counted either way;
   * logged once (the first failure after a success), at `error`, with the route and the policy in
   * the application's terms — never in the response.
   */
  unavailable (permit: Permit, error: unknown, retryAfterMs: number | undefined): boolean {
    const gate = permit.gate
    this.context.global.unavailable++
    gate.counters.unavailable++
    if (!gate.failing) {
      gate.failing = true
      this.context.log.error({
        route: gate.name,
        policy: gate.policy === undefined ? undefined : describePolicy(gate.policy),
        code: error instanceof RatesError ? error.code : error === undefined ? 'RATES_UNAVAILABLE' : undefined,
        err: error
      }, `fastify-admission: the rate-limit backend could not decide for ${gate.name} (${error === undefined ? 'every tracked client has live state' : error instanceof Error ? error.message : String(error)}); ${this.enforce ? `answering by onBackendError '${this.onBackendError}'` : 'admitting (enforce: false)'} until it can`)
    }
    if (this.failOpen) {
      permit.backendFailed = true
      permit.admitted = true
      return true
    }
    permit.refused()
    const wait = retryAfterMs ?? (error instanceof RatesUnavailableError ? error.retryAfterMs : undefined)
    this.answer(permit, 503, wait === undefined ? 1 : retrySeconds(wait), 'unavailable', true, MESSAGES.unavailable, NONE, 'backend-unavailable')
    return false
  }

  private wouldHave (permit: Permit, reason: 'limited' | 'shed', seconds: number): void {
    permit.request.log.info({ route: permit.gate.name, reason, retryAfterSeconds: seconds }, 'fastify-admission: would have refused this request (enforce: false)')
  }

  /** A refusal of `kind` (how it is sent), for `reason` (which step refused: counted on the gate that refused). */
  private answer (permit: Permit, status: 429 | 503, seconds: number, kind: RefusalReason, backendFailed: boolean, message: string, violated: readonly string[], reason: Reason): void {
    const gate = permit.gate
    countReason(gate.reasons, reason)
    refused(this.subscriberCalls, this.context.registration, permit.request, gate.name, kind, reason, status, seconds, kind === 'shed' ? undefined : permit.key, backendFailed)
    ;(permit.reply as unknown as Record<symbol, boolean>)[kGateRefusal] = true
    this.context.expose(permit.reply)
    this.refusals[kind](permit, status, seconds, kind, message, violated)
  }

  private fieldsOf (name: InFlightPolicyName, limit: number): { policy: string, rateLimit: string } {
    let fields = this.fieldsByName.get(name)
    if (fields === undefined || fields.limit !== limit) this.fieldsByName.set(name, fields = { limit, ...inFlightFields(name, limit) })
    return fields
  }
}

const NONE: readonly string[] = Object.freeze([])
const nothing = (): void => {}
const POLICY_LISTS: Readonly<Record<InFlightPolicyName, readonly string[]>> = Object.freeze({
  'in-flight': Object.freeze(['in-flight']),
  'route-in-flight': Object.freeze(['route-in-flight']),
  'long-lived': Object.freeze(['long-lived']),
  'route-long-lived': Object.freeze(['route-long-lived']),
  'client-in-flight': Object.freeze(['client-in-flight'])
})

/**
 * The policies whose quota refused the request: the gate's one, or those of its stack that had no
 * room (from the remote decision, or the synchronous stack's last one) — all of them when none did
 * alone (login throttling refusing more attempts in flight than the quota holds).
 */
function violatedBy (permit: Permit): readonly string[] {
  const gate = permit.gate
  const names = gate.policyNames
  const stacked = gate.stacked
  if (stacked === undefined) return names
  const policies = (permit.decision as StackDecision | undefined)?.policies
  const violated = policies !== undefined
    ? names.filter((_name, i) => !policies[i]!.allowed)
    : names.filter((_name, i) => stacked.sync!.refused[i] === 1)
  return violated.length === 0 ? names : violated
}

/** Why the quota refused: its first policy that had no room (the gate's one, or its stack's; the first when none did alone). */
function violatedReason (permit: Permit): Reason {
  const gate = permit.gate
  const reasons = gate.quotaReasons
  const stacked = gate.stacked
  if (stacked === undefined) return reasons[0]!
  const policies = (permit.decision as StackDecision | undefined)?.policies
  const first = policies !== undefined ? policies.findIndex((policy) => !policy.allowed) : stacked.sync!.refused.indexOf(1)
  return reasons[Math.max(0, first)]!
}
