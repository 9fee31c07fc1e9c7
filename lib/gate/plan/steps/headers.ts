import type { SynchronousDecisions, SynchronousStack } from '../../../rates/backend.js'
import type { RateDecision, StackDecision } from '../../../rates/decision.js'
import { moreAtOf, rateLimitHeader, rateLimitList } from '../../quotas/headers.js'
import { withPartitionKey, type PartitionKey } from '../../quotas/partition-key.js'
import { retrySeconds } from '../../outcomes/refusal-text.js'
import type { Step } from '../../outcomes/recorder.js'
import type { RouteGate } from '../../route-gate.js'
import { exposeToBrowsers } from '../../quotas/cors-exposure.js'

/**
 * The `RateLimit-Policy` and `RateLimit` fields of the quota's answer, on admissions and
 * refusals alike; absent from the plan with `headers: false`. The numbers are the quota's own:
 * a synchronous backend's right after its decision, a remote decision's (whose `moreAt` is on
 * the backend's clock, read against this process's: the two are taken to agree).
 */
export function headersNowStep (gate: RouteGate, sync: SynchronousDecisions, next: Step): Step {
  const policy = gate.policyHeader!
  const quota = gate.quota
  const start = gate.rateLimitStart
  return function headersNow (permit) {
    permit.reply.header('ratelimit-policy', policy).header('ratelimit', rateLimitHeader(sync.remaining, quota, sync.moreAt, sync.decidedAt, start))
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
    const retry = decision.allowed ? undefined : retrySeconds(decision.retryAfterMs)
    permit.reply.header('ratelimit-policy', policy).header('ratelimit', rateLimitHeader(decision.remaining, quota, moreAtOf(decision), Date.now(), start, retry))
    next(permit)
  }
}

/** A stack's fields: one item per policy, from the stack's own numbers. */
export function stackHeadersNowStep (gate: RouteGate, sync: SynchronousStack, next: Step): Step {
  const policy = gate.policyHeader!
  const { starts, quotas } = gate.stacked!
  return function stackHeadersNow (permit) {
    permit.reply.header('ratelimit-policy', policy).header('ratelimit', rateLimitList(starts, quotas, sync.remaining, sync.moreAt, sync.decidedAt))
    next(permit)
  }
}

export function stackHeadersLaterStep (gate: RouteGate, next: Step): Step {
  const policy = gate.policyHeader!
  const { starts, quotas } = gate.stacked!
  return function stackHeadersLater (permit) {
    const decision = permit.decision as RateDecision & StackDecision
    const outcomes = decision.policies
    const remaining = outcomes.map((p) => p.remaining)
    const moreAt = outcomes.map(moreAtOf)
    const refused = outcomes.map((p) => !p.allowed)
    const retry = decision.allowed ? undefined : retrySeconds(decision.retryAfterMs)
    permit.reply.header('ratelimit-policy', policy).header('ratelimit', rateLimitList(starts, quotas, remaining, moreAt, Date.now(), refused, retry))
    next(permit)
  }
}

/** `pk` on each `RateLimit` item just set (`headers.partitionKey`). */
export function partitionKeyStep (partitionKey: PartitionKey, next: Step): Step {
  return function withPk (permit) {
    const reply = permit.reply
    reply.header('ratelimit', withPartitionKey(reply.getHeader('ratelimit') as string, partitionKey(permit.key!)))
    next(permit)
  }
}

/** An admission's fields, readable by a page of another origin (see `exposeToBrowsers`). */
export function exposedStep (next: Step): Step {
  return function exposed (permit) {
    exposeToBrowsers(permit.reply)
    next(permit)
  }
}
