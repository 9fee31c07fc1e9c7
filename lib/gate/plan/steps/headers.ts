import type { SynchronousDecisions, SynchronousStack } from '../../../rates/backend.js'
import type { RateDecision, StackDecision } from '../../../rates/decision.js'
import { rateLimitHeader, rateLimitList } from '../../quotas/headers.js'
import type { Step } from '../../outcomes/recorder.js'
import type { RouteGate } from '../../route-gate.js'

/**
 * The `RateLimit-Policy` and `RateLimit` fields of the quota's answer, on admissions and
 * refusals alike; absent from the plan with `headers: false`. The numbers are the quota's own:
 * a synchronous backend's right after its decision, a remote decision's (whose `resetAt` is on
 * the backend's clock: its distance from the decision is what the field reports, and the local
 * clock is no worse a reference).
 */
export function headersNowStep (gate: RouteGate, sync: SynchronousDecisions, next: Step): Step {
  const policy = gate.policyHeader!
  const quota = gate.quota
  const start = gate.rateLimitStart
  return function headersNow (permit) {
    permit.reply.header('ratelimit-policy', policy).header('ratelimit', rateLimitHeader(sync.remaining, quota, sync.resetAt, sync.decidedAt, start))
    next(permit)
  }
}

/**
 * An admission without a decision (the backend could not decide, `onBackendError: 'allow'`): the
 * policy is known, what remains is not, so `RateLimit-Policy` alone — never a guessed `RateLimit`.
 */
export function policyOnlyStep (gate: RouteGate, next: Step): Step {
  const policy = gate.policyHeader!
  return function policyOnly (permit) {
    permit.reply.header('ratelimit-policy', policy)
    next(permit)
  }
}

export function headersLaterStep (gate: RouteGate, next: Step): Step {
  const policy = gate.policyHeader!
  const quota = gate.quota
  const start = gate.rateLimitStart
  return function headersLater (permit) {
    const decision = permit.decision!
    permit.reply.header('ratelimit-policy', policy).header('ratelimit', rateLimitHeader(decision.remaining, quota, decision.resetAt, Date.now(), start))
    next(permit)
  }
}

/** A stack's fields: one item per policy, from the stack's own numbers. */
export function stackHeadersNowStep (gate: RouteGate, sync: SynchronousStack, next: Step): Step {
  const policy = gate.policyHeader!
  const { starts, quotas } = gate.stacked!
  return function stackHeadersNow (permit) {
    permit.reply.header('ratelimit-policy', policy).header('ratelimit', rateLimitList(starts, quotas, sync.remaining, sync.resetAt, sync.decidedAt))
    next(permit)
  }
}

export function stackHeadersLaterStep (gate: RouteGate, next: Step): Step {
  const policy = gate.policyHeader!
  const { starts, quotas } = gate.stacked!
  return function stackHeadersLater (permit) {
    const outcomes = (permit.decision as RateDecision & StackDecision).policies
    const remaining = outcomes.map((p) => p.remaining)
    const resetAt = outcomes.map((p) => p.resetAt)
    permit.reply.header('ratelimit-policy', policy).header('ratelimit', rateLimitList(starts, quotas, remaining, resetAt, Date.now()))
    next(permit)
  }
}
