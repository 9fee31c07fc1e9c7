import { ceilDiv } from '../../core/rates/arithmetic.js'
import type { Policy } from '../../core/rates/types.js'
import { capacityOf } from '../../rates/policy.js'

/**
 * The quota a client can plan from (IETF httpapi-ratelimit-headers, draft 10): `q` units within
 * `w` seconds. `q` is the policy's capacity, what a client at rest may send at once: `burst` for
 * token-bucket and gcra, `limit` for the window algorithms. `w` is the time that whole quota takes
 * to come back, rounded up to a second: `burst` at `limit` per `windowMs` for the first two, one
 * window for the others. Rounding up only ever understates the rate, so a client that paces
 * itself at q per w is never refused for it; and `r` (what remains) is never above `q`.
 */
export function quotaOf (policy: Policy): { quota: number, windowSeconds: number } {
  const quota = capacityOf(policy)
  const refillMs = policy.algorithm === 'token-bucket' || policy.algorithm === 'gcra'
    ? ceilDiv(quota * policy.windowMs, policy.limit)
    : policy.windowMs
  return { quota, windowSeconds: Math.max(1, ceilDiv(refillMs, 1000)) }
}

/** `RateLimit-Policy`: `"<name>";q=<quota>;w=<seconds>` for each policy (draft 10's list), named `default` unless a tier or a stack names it. */
export function policyHeader (policies: Policy | readonly Policy[], names: readonly string[] = ['default']): string {
  return (Array.isArray(policies) ? policies as readonly Policy[] : [policies as Policy]).map((policy, i) => {
    const { quota, windowSeconds } = quotaOf(policy)
    return `"${names[i]!}";q=${quota};w=${windowSeconds}`
  }).join(', ')
}

/**
 * `RateLimit` after a decision: `r`, the cost-1 units left (clamped to 0..quota, whatever a custom
 * backend reports), and `t`, the seconds until full capacity, rounded up.
 */
export function rateLimitHeader (remaining: number, quota: number, resetAt: number, now: number, start = DEFAULT_START): string {
  return `${start}${clampRemaining(remaining, quota)};t=${secondsUntil(resetAt, now)}`
}

/** `RateLimit` of a stack: one item per policy, in the stack's order. */
export function rateLimitList (starts: readonly string[], quotas: readonly number[], remaining: ArrayLike<number>, resetAt: ArrayLike<number>, now: number): string {
  let value = ''
  for (let i = 0; i < starts.length; i++) {
    value += `${i === 0 ? '' : ', '}${rateLimitHeader(remaining[i]!, quotas[i]!, resetAt[i]!, now, starts[i])}`
  }
  return value
}

/** Whole seconds from `now` to `at`, rounded up, never below 0. */
function secondsUntil (at: number, now: number): number {
  return Math.ceil(Math.max(0, at - now) / 1000)
}

/** The start of `RateLimit`'s value for a policy named `name`, made once per route: `"<name>";r=`. */
export function rateLimitStart (name: string): string {
  return `"${name}";r=`
}
const DEFAULT_START = rateLimitStart('default')

/** `r`: the units left, within 0..quota whatever a custom backend reports. */
export function clampRemaining (remaining: number, quota: number): number {
  return remaining > quota ? quota : remaining > 0 ? remaining : 0
}
