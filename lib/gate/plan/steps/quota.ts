import { ADMITTED, UNDECIDABLE, type BackendLimiter, type Verdicts } from '../../../rates/backend.js'
import type { PolicyOutcome, RateDecision, StackDecision } from '../../../rates/decision.js'
import { RatesUnavailableError } from '../../../rates/errors.js'
import type { Outcomes, Step } from '../../outcomes/recorder.js'
import type { RouteGate } from '../../route-gate.js'

/**
 * The client's quota, on a backend with synchronous decisions (memory): decided on the request's
 * own path, with no promise. `next` gets the answer (headers, then the verdict); a backend that
 * cannot decide goes to `onBackendError`, whose admission goes on with `admit`.
 */
export function decideNowStep (gate: RouteGate, sync: Verdicts, outcomes: Outcomes, next: Step, admit: Step): Step {
  const cost = gate.cost
  return function decideNow (permit) {
    const verdict = sync.decide(permit.key!, cost)
    if (verdict === UNDECIDABLE) {
      outcomes.unavailable(permit, undefined, sync.retryAfterMs, admit)
      return
    }
    gate.failing = false
    permit.admitted = verdict === ADMITTED
    permit.retryAfterMs = sync.retryAfterMs
    next(permit)
  }
}

/**
 * The client's quota on a backend that answers by promise (Redis): one round trip. Whatever the
 * backend does wrong — it cannot decide, it finds another policy at the quota's address, it
 * answers nonsense (a stack's decision without its policies included), it throws — the request
 * is answered by `onBackendError`, counted as `unavailable`, and logged once per route until a
 * decision succeeds. The rest of the plan runs in the promise's continuation, where no hook runner
 * catches a throw: one (a logger that throws) answers the request 500 (`lost`), never an
 * unhandled rejection.
 */
export function decideLaterStep (gate: RouteGate, limiter: BackendLimiter, outcomes: Outcomes, next: Step, admit: Step): Step {
  const cost = gate.cost
  const policies = gate.stacked?.quotas.length
  return function decideLater (permit) {
    let pending: Promise<RateDecision>
    try {
      pending = limiter.consume(permit.key!, cost)
    } catch (error) {
      // A custom backend that throws instead of rejecting.
      outcomes.unavailable(permit, error, undefined, admit)
      return
    }
    Promise.resolve(pending).then(
      (decision: RateDecision) => {
        if (!isDecision(decision) || (policies !== undefined && !hasPolicies(decision, policies))) {
          outcomes.unavailable(permit, new RatesUnavailableError(`the backend answered ${typeof decision === 'object' ? `an object that is not a ${policies === undefined ? 'decision' : 'stack\'s decision'}` : `a ${typeof decision}`}`), undefined, admit)
          return
        }
        gate.failing = false
        permit.decision = decision
        permit.admitted = decision.allowed
        permit.retryAfterMs = decision.allowed ? 0 : decision.retryAfterMs
        next(permit)
      },
      (error: unknown) => { outcomes.unavailable(permit, error, undefined, admit) }
    ).then(undefined, (error: unknown) => { permit.lost(error) })
  }
}

/** The quota's verdict: an admitted request goes on; an empty quota is a refusal (or, not enforcing, a would-limit). */
export function verdictStep (outcomes: Outcomes, next: Step): Step {
  return function verdict (permit) {
    if (permit.admitted) next(permit)
    else outcomes.limited(permit, next)
  }
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

/**
 * Notes when the quota decides, on its own clock (a route that charges after the work: units it
 * gives back belong to the window that admitted them). Read before the decision: on Redis the
 * server's time as its last reply gave it, never later than the decision's own.
 */
export function decidedAtStep (limiter: BackendLimiter, next: Step): Step {
  return function decidedAt (permit) {
    permit.decidedAt = limiter.now?.()
    next(permit)
  }
}
