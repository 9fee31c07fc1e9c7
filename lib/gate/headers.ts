import type { Policy } from '../core/rates/types.js'

/** `RateLimit-Policy` (IETF httpapi-ratelimit-headers, draft 10): quota and window in seconds, rounded up. */
export function policyHeader (policy: Policy): string {
  return `"default";q=${policy.limit};w=${Math.ceil(policy.windowMs / 1000)}`
}

/** `RateLimit` after a decision: what remains and the seconds until full capacity, rounded up. */
export function rateLimitHeader (remaining: number, resetAt: number, now: number): string {
  return `"default";r=${remaining};t=${Math.ceil(Math.max(0, resetAt - now) / 1000)}`
}
