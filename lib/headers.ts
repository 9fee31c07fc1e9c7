import type { RatePolicy } from './options.js'
import type { TokenBucketLimiter } from './token-bucket.js'

/** `RateLimit-Policy` (IETF httpapi-ratelimit-headers, draft 10): quota and window in seconds, rounded up. */
export function policyHeader (policy: RatePolicy): string {
  return `"default";q=${policy.limit};w=${Math.ceil(policy.windowMs / 1000)}`
}

/** `RateLimit` after the limiter's last decision: what remains and the seconds until it is full again. */
export function rateLimitHeader (limiter: TokenBucketLimiter): string {
  return `"default";r=${limiter.remaining};t=${Math.ceil(limiter.resetMs / 1000)}`
}
