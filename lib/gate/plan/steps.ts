import type { FastifyRequest } from 'fastify'
import { isThenable, settleUnused, type Contained } from '../../callbacks/contained.js'
import type { Pressure, ScreenOutcomes } from '../../pressure/pressure.js'
import { ADMITTED, UNDECIDABLE, type BackendLimiter, type SynchronousDecisions, type SynchronousStack, type Verdicts } from '../../rates/backend.js'
import type { PolicyOutcome, RateDecision, StackDecision } from '../../rates/decision.js'
import { RatesUnavailableError } from '../../rates/errors.js'
import { AdmissionTierError } from '../errors.js'
import type { AllowMatcher } from '../options/allow-list.js'
import type { Outcomes } from '../outcomes/recorder.js'
import { retrySeconds } from '../outcomes/refusal-text.js'
import { moreAtOf, rateLimitHeader, rateLimitList, setFields, type Expose } from '../headers/rate-limit-fields.js'
import { withPartitionKey, type PartitionKey } from '../headers/partition-key.js'
import { watchLongLived, type LongLivedConnections, type LongLivedKind } from '../release/long-lived.js'
import type { Permit } from '../release/permit.js'
import type { Slots, Take } from '../release/slots.js'
import type { ClientSlots } from '../release/client-slots.js'
import type { ClientSlotBook } from '../../rates/backend.js'
import { isRetry } from '../../core/attempt.js'
import type { RouteGate } from '../route-gate.js'
import type { LoginAttempts } from './login-attempts.js'

/**
 * A step of a route's plan: it decides on the permit, then says whether the request goes on to the
 * next step (`true`), or not (`false`): the step answered it, or something it started (a decision
 * by promise, `pressureHandler`) will run the rest of the plan when it comes back.
 */
export type Step = (permit: Permit) => boolean

/**
 * Names a step, as `app.admission.plan()` lists it. Set where the step is made (once per route),
 * not left to the function's own name, which a bundler renames when another module uses it too.
 */
export function named<S extends Step> (name: string, step: S): S {
  Object.defineProperty(step, 'name', { value: name })
  return step
}

/** A step that may stop a request and run the rest of its plan later: where the rest starts. */
export type Resume = (permit: Permit) => void

/** A tier's steps, listed under the tier step (`plan()`). */
export interface TierSteps { readonly [tier: string]: readonly Step[] }

/**
 * Runs `steps` for `permit` from `from`, as Fastify runs its hooks: each step decides, and the loop
 * goes on while they say so. Every plan's list ends with a step that stops (`admit`,
 * `onToPreHandler`, a tier's pick), so the loop needs no bound of its own. Every callback of the application is contained where it is called;
 * what still throws (a logger that throws) is answered 500 unless the request was answered already
 * (`lost`) — not left to Fastify's hook runner, which takes a falsy throw for "go on", nor to a
 * promise's continuation, where nothing would catch it.
 */
export function runSteps (steps: readonly Step[], permit: Permit, from: number): void {
  try {
    let i = from
    while (steps[i]!(permit)) i++
  } catch (error) {
    permit.lost(error)
  }
}

// The steps a plan is made of, in the order a plan puts them: shed (pressure, the in-flight
// slots, long-lived places), then limit (the client's key, the allow list, login attempts, the
// quota's decision, its fields, its verdict), then admit. Each is named (`named`): the name is
// what `app.admission.plan()` lists. A step returns true to go on, false when it answered the
// request or will run the rest of the plan itself (`Resume`).

// ---- shed --------------------------------------------------------------------------------------

/** Where a retry is shed before a first attempt would be: each part present only where the route sheds there. */
export interface RetryShedding {
  /** The registration's in-flight gate: a retry is refused within its last `retries.reserve` of slots. */
  readonly slots: Slots | undefined
  /** The route's own semaphore: a retry is refused from this count of held slots on (0: none). */
  readonly routeLimit: number
  /** Queueing delay: a retry is shed while a standing queue lasts. */
  readonly pressure: Pressure | undefined
}

/**
 * Retries are shed first (`retries`): a request whose attempt header says it is a retry (2 and up)
 * is refused where a first attempt would still be admitted — within the slots an in-flight limit
 * keeps for first attempts, or while the queue-delay controller sees a standing queue. A request
 * without the header, or with one that cannot be read, is a first attempt and goes straight on.
 */
export function retryAttemptStep (header: string, where: RetryShedding, outcomes: Outcomes): Step {
  const { slots, routeLimit, pressure } = where
  return named('retryAttempt', function (permit) {
    const text = permit.request.raw.headers[header]
    if (!isRetry(typeof text === 'string' ? text : undefined)) return true
    permit.retry = true
    if (slots?.fullForRetries === true) return outcomes.fullForRetries(permit, false)
    if (routeLimit !== 0 && permit.route.counters.inFlight >= routeLimit) return outcomes.fullForRetries(permit, true)
    return pressure === undefined || !pressure.shedsRetry(permit, outcomes.shedByPressure)
  })
}

/**
 * Pressure and queueing delay, first of all: while nothing may shed (`active` is 0) the request
 * goes straight on; otherwise pressure decides — shed with its own `Retry-After` and message,
 * handed to `pressureHandler` (whose failures on this route `handler` contains), or on (`rest`).
 */
export function pressureStep (pressure: Pressure, outcomes: Outcomes, handler: Contained, rest: Resume): Step {
  const to: ScreenOutcomes<Permit> = {
    shed: outcomes.shedByPressure,
    goOn: rest,
    lost: (permit, error) => { permit.lost(error) },
    handler
  }
  return named('underPressure', function (permit) {
    if (pressure.active === 0) return true
    pressure.screen(permit, to)
    return false
  })
}

/**
 * The in-flight permit: the global slot by the route's priority (`take`), then the route's own.
 * A full gate sheds the request — the first refusal, before any quota is touched.
 */
export function inFlightStep (take: Take, outcomes: Outcomes): Step {
  return named('inFlight', function (permit) {
    return take(permit) || outcomes.full(permit)
  })
}

/**
 * Requests that hold no slot (those that matched no route: a 404 does no work to protect) are
 * refused while the global gate is full.
 */
export function whileFullStep (isFull: () => boolean, outcomes: Outcomes): Step {
  return named('whileFull', function (permit) {
    return !isFull() || outcomes.full(permit)
  })
}

/**
 * On a route known to be long-lived: the request takes a place among the long-lived connections (a
 * full place is a 503, `long-lived` or `route-long-lived`) and its reply is watched for the moment
 * its long-lived phase begins. A plain request to a websocket route (no `Upgrade`) is an ordinary one.
 */
export function longLivedStep (kind: LongLivedKind, connections: LongLivedConnections, outcomes: Outcomes): Step {
  return named('longLivedPlace', function (permit) {
    if (kind === 'upgrade' && permit.request.raw.headers.upgrade === undefined) return true
    if (!connections.take(permit)) return outcomes.fullLongLived(permit)
    watchLongLived(permit, kind)
    return true
  })
}

// ---- limit -------------------------------------------------------------------------------------

/**
 * The client's key for the quotas (the `key` option's, or the address). An application's `key`
 * that throws or returns no key answers 500 (Fastify's error path, the application's error) and
 * the permit goes back: without a key there is no quota to decide on, and another one (the
 * address) would let a client that can make its `key` throw choose its quota. Logged once for the
 * route (`contained`).
 */
export function clientKeyStep (keyOf: (request: FastifyRequest) => string, contained: Contained): Step {
  return named('clientKey', function (permit) {
    const key = ask(contained, permit, 'key', keyOf)
    if (key === FAILED) return false
    contained.worked()
    permit.key = key
    return true
  })
}

/** The allow list: a client on it is admitted, taking nothing from its quota and getting no headers. */
export function allowListStep (allows: AllowMatcher, contained: Contained, outcomes: Outcomes): Step {
  return named('allowList', function (permit) {
    const on = onList(allows, contained, permit)
    if (on === true) outcomes.allowed(permit)
    return on === false
  })
}

/**
 * The allow list before shedding (`allowListSkipsShedding`): a client on it is admitted even when
 * the gate is full (holding a slot when one is free, so that the gauge counts it); any other goes
 * on to the in-flight gate and its quota, with its key already made.
 */
export function allowFirstStep (allows: AllowMatcher, contained: Contained, take: Take, outcomes: Outcomes): Step {
  return named('allowFirst', function (permit) {
    const on = onList(allows, contained, permit)
    if (on === true) {
      take(permit)
      outcomes.allowed(permit)
    }
    return on === false
  })
}

/**
 * Whether the client is on the list; undefined when the application's function threw (a 500 of its
 * error, the permit back, logged once for the route): whether the client may skip its quota is not
 * known, and neither a yes nor a no would be the application's answer.
 */
function onList (allows: AllowMatcher, contained: Contained, permit: Permit): boolean | undefined {
  const on = ask(contained, permit, 'allowList', (request) => allows(request, permit.key!))
  if (on === FAILED) return undefined
  contained.worked()
  return on
}

/** What `ask` returns when the application's callback threw. */
const FAILED: unique symbol = Symbol('failed')

/**
 * The application's `callback` (named for the log) called for the request inside its boundary: its
 * value, or FAILED when it threw — the request is then answered 500 with its error, logged once
 * for the route.
 */
function ask<T> (contained: Contained, permit: Permit, callback: string, call: (request: FastifyRequest) => T): T | typeof FAILED {
  try {
    return call(permit.request)
  } catch (error) {
    contained.failed(error)
    permit.fail(error, callback)
    return FAILED
  }
}

/**
 * A client's in-flight slot (`clientInFlight`): taken for the request's key while the client holds
 * fewer than `limit`, given back when the permit ends; a client at its limit is refused (429, the
 * `client-in-flight` policy) before its quota is touched.
 */
export function clientInFlightStep (slots: ClientSlots, limit: number, outcomes: Outcomes): Step {
  return named('clientInFlight', function (permit) {
    if (!slots.take(permit.key!, limit)) return outcomes.clientFull(permit, limit)
    permit.clientHeld = true
    return true
  })
}

/**
 * A client's in-flight slot held for the fleet (`clientInFlight` on Redis): one round trip, then
 * the rest of the plan (`rest`). A permit that ended meanwhile (its client left) gives the slot
 * back at once. A backend that cannot answer goes to `onBackendError`, as a quota's decision does.
 */
export function clientInFlightLaterStep (book: ClientSlotBook, limit: number, outcomes: Outcomes, rest: Resume): Step {
  return named('clientInFlight', function (permit) {
    const key = permit.key!
    book.take(key, limit).then(
      (taken) => {
        if (permit.how !== undefined) {
          if (taken) book.release(key)
          return
        }
        if (!taken) {
          outcomes.clientFull(permit, limit)
          return
        }
        permit.clientHeld = true
        rest(permit)
      },
      (error: unknown) => { if (outcomes.unavailable(permit, error, undefined)) rest(permit) }
    ).then(undefined, (error: unknown) => { permit.lost(error) })
    return false
  })
}

/** Login throttling: the attempt counts as a failure to come from now, before its check is sent (see `LoginAttempts`). */
export function loginAttemptStep (failures: LoginAttempts): Step {
  return named('loginAttempt', function (permit) {
    failures.begin(permit)
    return true
  })
}

/**
 * Tiers: `tier(request)` names the quota the request takes from, and its steps decide. A name that
 * is no declared tier answers 500 (`AdmissionTierError`, the declared names listed, never the
 * value), and so does a `tier` that throws (its own error): without a tier there is no quota to
 * decide on. The permit goes back; logged once for the route (`contained`).
 */
export function tierStep (tier: (request: FastifyRequest) => string, tiers: ReadonlyMap<string, { readonly gate: RouteGate, readonly steps: readonly Step[] }>, contained: Contained): Step {
  function pickTier (permit: Permit): boolean {
    const name: unknown = ask(contained, permit, 'tier', tier)
    if (name === FAILED) return false
    const chosen = typeof name === 'string' ? tiers.get(name) : undefined
    if (chosen === undefined) {
      if (isThenable(name)) settleUnused(name)
      const error = new AdmissionTierError(name, [...tiers.keys()])
      contained.failed(error)
      permit.fail(error)
      return false
    }
    contained.worked()
    permit.gate = chosen.gate
    runSteps(chosen.steps, permit, 0)
    return false
  }
  const listed: TierSteps = Object.fromEntries([...tiers].map(([name, one]) => [name, one.steps]))
  return Object.assign(named('pickTier', pickTier), { tiers: listed })
}

/**
 * Notes when the quota decides, on its own clock (a route that charges after the work: units it
 * gives back belong to the window that admitted them). Read before the decision: on Redis the
 * server's time as its last reply gave it, never later than the decision's own.
 */
export function decidedAtStep (limiter: BackendLimiter): Step {
  return named('decidedAt', function (permit) {
    permit.decidedAt = limiter.now?.()
    return true
  })
}

/**
 * The client's quota, on a backend with synchronous decisions (memory): decided on the request's
 * own path, with no promise. A backend that cannot decide goes to `onBackendError`.
 */
export function decideNowStep (gate: RouteGate, sync: Verdicts, outcomes: Outcomes): Step {
  const cost = gate.cost
  return named('decideNow', function (permit) {
    const verdict = sync.decide(permit.key!, cost)
    if (verdict === UNDECIDABLE) return outcomes.unavailable(permit, undefined, sync.retryAfterMs)
    gate.failing = false
    permit.admitted = verdict === ADMITTED
    permit.retryAfterMs = sync.retryAfterMs
    return true
  })
}

/**
 * The client's quota on a backend that answers by promise (Redis): one round trip, then the rest
 * of the plan (`rest`). Whatever the backend does wrong — it cannot decide, it finds another
 * policy at the quota's address, it answers nonsense (a stack's decision without its policies
 * included), it throws — the request is answered by `onBackendError`, counted as `unavailable`,
 * and logged once per route until a decision succeeds.
 */
export function decideLaterStep (gate: RouteGate, limiter: BackendLimiter, outcomes: Outcomes, rest: Resume): Step {
  const cost = gate.cost
  const policies = gate.stacked?.quotas.length
  const unavailable = (permit: Permit, error: unknown): void => {
    if (outcomes.unavailable(permit, error, undefined)) rest(permit)
  }
  return named('decideLater', function (permit) {
    let pending: Promise<RateDecision>
    try {
      pending = limiter.consume(permit.key!, cost)
    } catch (error) {
      // A custom backend that throws instead of rejecting.
      return outcomes.unavailable(permit, error, undefined)
    }
    Promise.resolve(pending).then(
      (decision: RateDecision) => {
        if (!isDecision(decision) || (policies !== undefined && !hasPolicies(decision, policies))) {
          unavailable(permit, new RatesUnavailableError(`the backend answered ${typeof decision === 'object' ? `an object that is not a ${policies === undefined ? 'decision' : 'stack\'s decision'}` : `a ${typeof decision}`}`))
          return
        }
        gate.failing = false
        permit.decision = decision
        permit.admitted = decision.allowed
        permit.retryAfterMs = decision.allowed ? 0 : decision.retryAfterMs
        rest(permit)
      },
      (error: unknown) => { unavailable(permit, error) }
    ).then(undefined, (error: unknown) => { permit.lost(error) })
    return false
  })
}

/** A stack's decision carries each policy's numbers (what its `RateLimit` fields say): checked, as the decision is. */
function hasPolicies (decision: RateDecision, count: number): boolean {
  const outcomes = (decision as Partial<StackDecision>).policies
  return Array.isArray(outcomes) && outcomes.length === count && outcomes.every((p: Partial<PolicyOutcome> | null) =>
    typeof p === 'object' && p !== null && Number.isSafeInteger(p.remaining) && Number.isSafeInteger(p.resetAt))
}

/** A decision as the backend contract describes it: checked, since a custom backend may get it wrong. */
function isDecision (value: unknown): value is RateDecision {
  if (typeof value !== 'object' || value === null) return false
  const d = value as { allowed?: unknown, remaining?: unknown, resetAt?: unknown, retryAfterMs?: unknown }
  return (d.allowed === true || (d.allowed === false && typeof d.retryAfterMs === 'number' && Number.isSafeInteger(d.retryAfterMs) && d.retryAfterMs >= 0)) &&
    typeof d.remaining === 'number' && Number.isSafeInteger(d.remaining) &&
    typeof d.resetAt === 'number' && Number.isSafeInteger(d.resetAt)
}

/*
 * The `RateLimit-Policy` and `RateLimit` fields of the quota's answer, on admissions and refusals
 * alike; absent from the plan with `headers: false`. The numbers are the quota's own: a
 * synchronous backend's right after its decision, a remote decision's (whose `moreAt` is on the
 * backend's clock, read against this process's: the two are taken to agree). A request admitted
 * because the backend could not decide (`onBackendError: 'allow'`) gets `RateLimit-Policy` alone:
 * the policy is known, what remains is not — never a guessed `RateLimit`.
 */

export function headersNowStep (gate: RouteGate, sync: SynchronousDecisions): Step {
  const policy = gate.policyHeader!
  const quota = gate.quota
  const start = gate.rateLimitStart
  return named('headersNow', function (permit) {
    setFields(permit.reply, policy, permit.backendFailed ? undefined : rateLimitHeader(sync.remaining, quota, sync.moreAt, sync.decidedAt, start))
    return true
  })
}

export function headersLaterStep (gate: RouteGate): Step {
  const policy = gate.policyHeader!
  const quota = gate.quota
  const start = gate.rateLimitStart
  return named('headersLater', function (permit) {
    if (permit.backendFailed) {
      setFields(permit.reply, policy, undefined)
      return true
    }
    const decision = permit.decision!
    const retry = decision.allowed ? undefined : retrySeconds(decision.retryAfterMs)
    setFields(permit.reply, policy, rateLimitHeader(decision.remaining, quota, moreAtOf(decision), Date.now(), start, retry))
    return true
  })
}

/** A stack's fields: one item per policy, from the stack's own numbers. */
export function stackHeadersNowStep (gate: RouteGate, sync: SynchronousStack): Step {
  const policy = gate.policyHeader!
  const { starts, quotas } = gate.stacked!
  return named('stackHeadersNow', function (permit) {
    setFields(permit.reply, policy, permit.backendFailed ? undefined : rateLimitList(starts, quotas, sync.remaining, sync.moreAt, sync.decidedAt))
    return true
  })
}

export function stackHeadersLaterStep (gate: RouteGate): Step {
  const policy = gate.policyHeader!
  const { starts, quotas } = gate.stacked!
  return named('stackHeadersLater', function (permit) {
    if (permit.backendFailed) {
      setFields(permit.reply, policy, undefined)
      return true
    }
    const decision = permit.decision as RateDecision & StackDecision
    const outcomes = decision.policies
    const remaining = outcomes.map((p) => p.remaining)
    const moreAt = outcomes.map(moreAtOf)
    const refused = outcomes.map((p) => !p.allowed)
    const retry = decision.allowed ? undefined : retrySeconds(decision.retryAfterMs)
    setFields(permit.reply, policy, rateLimitList(starts, quotas, remaining, moreAt, Date.now(), refused, retry))
    return true
  })
}

/** `pk` on each `RateLimit` item just set (`headers.partitionKey`). */
export function partitionKeyStep (partitionKey: PartitionKey): Step {
  return named('withPk', function (permit) {
    if (permit.backendFailed) return true
    const reply = permit.reply
    reply.header('ratelimit', withPartitionKey(reply.getHeader('ratelimit') as string, partitionKey(permit.key!)))
    return true
  })
}

/** The quota's verdict: an admitted request goes on; an empty quota is a refusal (or, not enforcing, a would-limit). */
export function verdictStep (outcomes: Outcomes): Step {
  return named('verdict', function (permit) {
    return permit.admitted || outcomes.limited(permit)
  })
}

/** An admission's fields, readable by a page of another origin (`expose`: the formats' names, see `browserExposure`). */
export function exposedStep (expose: Expose): Step {
  return named('exposed', function (permit) {
    expose(permit.reply)
    return true
  })
}

// ---- admit -------------------------------------------------------------------------------------

/** The request goes on to its handler, holding its permit until its work ends: the last step. */
export function admitStep (outcomes: Outcomes): Step {
  return named('admit', function (permit) {
    outcomes.admitted(permit)
    return false
  })
}

/** The end of `onRequest` when the rate check runs in `preHandler`: on to Fastify's next hooks. */
export function onToPreHandlerStep (): Step {
  return named('onToPreHandler', function (permit) {
    permit.done()
    return false
  })
}
