import type { Policy } from '../../core/rates/types.js'
import { isStack, type StackLimits } from './limits.js'

/** A policy in the words of the options that made it, for logs: `100 per 60000 ms (token-bucket, burst 20)`, `…, penalty restart)`. */
export function describePolicy (policy: Policy): string {
  const burst = policy.burst === undefined || policy.burst === policy.limit ? '' : `, burst ${policy.burst}`
  const penalty = policy.penalty === undefined ? '' : policy.penalty.mode === 'restart' ? ', penalty restart' : `, penalty double up to ${policy.penalty.maxMs} ms`
  return `${policy.limit} per ${policy.windowMs} ms (${policy.algorithm}${burst}${penalty})`
}

/** A policy or a stack, for messages: a stack's policies joined with ` and `. */
export function describeLimits (limits: Readonly<Policy> | StackLimits): string {
  return isStack(limits) ? limits.policies.map((p) => `${describePolicy(p.policy)} as "${p.name}"`).join(' and ') : describePolicy(limits)
}
