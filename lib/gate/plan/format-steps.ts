import type { SynchronousDecisions, SynchronousStack } from '../../rates/backend.js'
import type { RateDecision, StackDecision } from '../../rates/decision.js'
import { clampRemaining } from '../headers/rate-limit-fields.js'
import { resetSeconds, writeStack, type ExpiringLimit } from '../headers/header-formats.js'
import { retrySeconds } from '../outcomes/refusal-text.js'
import type { RouteGate } from '../route-gate.js'
import { named, type Step } from './steps.js'

/*
 * The fields of the older formats (`headers: { format: 'draft-7' | 'draft-6' | 'x-ratelimit' }`):
 * the expiring limit, what is left of it and when it resets, after the quota's decision, on
 * admissions and refusals alike. The writer (`write`, every older format the registration sends)
 * was chosen when the plan was made. A request admitted because the backend could not decide
 * gets none of them: what remains is not known.
 */

/** `RateLimit-Policy` of drafts 6 and 7 (`<q>;w=<s>`), the gate's constant. */
export function olderPolicyStep (policy: string): Step {
  return named('policyFields', function (permit) {
    permit.reply.header('ratelimit-policy', policy)
    return true
  })
}

/** The numbers of a synchronous decision (memory); a refusal's reset is its `Retry-After`. */
export function expiringNowStep (gate: RouteGate, sync: SynchronousDecisions, write: ExpiringLimit): Step {
  const quota = gate.quota
  return named('limitFieldsNow', function (permit) {
    if (permit.backendFailed) return true
    const retry = permit.admitted ? undefined : retrySeconds(permit.retryAfterMs)
    write(permit.reply, quota, clampRemaining(sync.remaining, quota), resetSeconds(sync.resetAt, sync.decidedAt, retry))
    return true
  })
}

/** The numbers of a decision by promise (Redis), its `resetAt` read against this process's clock. */
export function expiringLaterStep (gate: RouteGate, write: ExpiringLimit): Step {
  const quota = gate.quota
  return named('limitFieldsLater', function (permit) {
    if (permit.backendFailed) return true
    const decision = permit.decision as RateDecision
    const retry = decision.allowed ? undefined : retrySeconds(decision.retryAfterMs)
    write(permit.reply, quota, clampRemaining(decision.remaining, quota), resetSeconds(decision.resetAt, Date.now(), retry))
    return true
  })
}

/** A stack's numbers (memory): those of its policy with the least left. */
export function stackExpiringNowStep (gate: RouteGate, sync: SynchronousStack, write: ExpiringLimit): Step {
  const quotas = gate.stacked!.quotas
  return named('stackLimitFieldsNow', function (permit) {
    if (permit.backendFailed) return true
    const retry = permit.admitted ? undefined : retrySeconds(permit.retryAfterMs)
    writeStack(write, permit.reply, quotas, sync.remaining, sync.resetAt, sync.decidedAt, retry)
    return true
  })
}

/** A stack's numbers, from a decision by promise. */
export function stackExpiringLaterStep (gate: RouteGate, write: ExpiringLimit): Step {
  const quotas = gate.stacked!.quotas
  return named('stackLimitFieldsLater', function (permit) {
    if (permit.backendFailed) return true
    const decision = permit.decision as RateDecision & StackDecision
    const retry = decision.allowed ? undefined : retrySeconds(decision.retryAfterMs)
    const policies = decision.policies
    writeStack(write, permit.reply, quotas, policies.map((p) => p.remaining), policies.map((p) => p.resetAt), Date.now(), retry)
    return true
  })
}
