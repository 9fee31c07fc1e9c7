import { newBucket, take } from '../bucket.js'
import { ceilDiv, floorDiv } from './arithmetic.js'
import type { BucketShape } from '../bucket.js'
import type { Kernel, Outcome, Policy } from './types.js'

/**
 * A token bucket's state, counted in 1/windowMs of a token: `tokens` units at tick `last`.
 * The same shape as the core's `Bucket`, so it runs on `take` as is.
 */
export interface TokenBucketState {
  readonly tokens: number
  readonly last: number
}

// The core bucket in units of 1/windowMs of a token: capacity burst*windowMs units, `limit` units
// every tick (`limit` tokens per window), and a cost c takes c*windowMs units. With interval 1 no
// fraction of a step is ever left over, so `take`'s retry is exact.
function shape (policy: Policy): BucketShape {
  return { capacity: (policy.burst ?? policy.limit) * policy.windowMs, refill: policy.limit, interval: 1 }
}

// The tick at which the bucket is full: nothing refills before `last` (a clock that stepped back
// refills nothing), then `limit` units a tick.
function fullAt (state: TokenBucketState, capacity: number, limit: number): number {
  return state.last + ceilDiv(Math.max(0, capacity - state.tokens), limit)
}

function fresh (policy: Policy, now: number): TokenBucketState {
  return newBucket(shape(policy).capacity, now)
}

function consume (state: TokenBucketState, policy: Policy, now: number, cost: number): Outcome<TokenBucketState> {
  const config = shape(policy)
  const r = take(state, config, now, cost * policy.windowMs)
  const next: TokenBucketState = { tokens: r.tokens, last: r.last }
  const remaining = floorDiv(r.tokens, policy.windowMs)
  return {
    allowed: r.ok,
    remaining,
    // `take` counts its wait from `last`; when the caller's clock stepped back (now < last),
    // nothing refills until `last`, so that gap is part of the wait.
    retryAfterMs: r.ok ? 0 : r.retry + (r.last - now),
    resetAt: fullAt(next, config.capacity, policy.limit),
    // One more whole token: (remaining + 1) * windowMs units, `limit` a tick from `last`.
    moreAt: remaining * policy.windowMs >= config.capacity ? now : r.last + ceilDiv((remaining + 1) * policy.windowMs - r.tokens, policy.limit),
    state: next
  }
}

function recoversAt (state: TokenBucketState, policy: Policy): number {
  return fullAt(state, shape(policy).capacity, policy.limit)
}

function write (state: TokenBucketState, row: Float64Array, base: number): void {
  row[base] = state.tokens
  row[base + 1] = state.last
}

function read (row: Float64Array, base: number): TokenBucketState {
  return { tokens: row[base] as number, last: row[base + 1] as number }
}

export const tokenBucket: Kernel<TokenBucketState> = { fields: 2, fresh, consume, recoversAt, write, read }
