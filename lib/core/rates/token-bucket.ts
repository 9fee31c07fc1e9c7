import { newBucket, take } from '../bucket.js'
import { ceilDiv, floorDiv } from './arithmetic.js'
import type { BucketShape } from '../bucket.js'
import { chargedOutcome } from './charge.js'
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
  // A level below empty (a charge's debt) has no whole token.
  const remaining = Math.max(0, floorDiv(r.tokens, policy.windowMs))
  return {
    allowed: r.ok,
    remaining,
    // `take` counts its wait from `last`; when the caller's clock stepped back (now < last),
    // nothing refills until `last`, so that gap is part of the wait.
    retryAfterMs: r.ok ? 0 : r.retry + (r.last - now),
    // A full bucket is full now, also on a clock that stepped back before `last`.
    resetAt: r.tokens >= config.capacity ? now : fullAt(next, config.capacity, policy.limit),
    // One more whole token: (remaining + 1) * windowMs units, `limit` a tick from `last`.
    moreAt: remaining * policy.windowMs >= config.capacity ? now : r.last + ceilDiv((remaining + 1) * policy.windowMs - r.tokens, policy.limit),
    state: next
  }
}

// A charge refills to now like a take, then moves the level by units * windowMs: down to one
// capacity below empty (a debt that time repays at `limit` units a tick), up to capacity.
function charge (state: TokenBucketState, policy: Policy, now: number, units: number): Outcome<TokenBucketState> {
  const config = shape(policy)
  const r = take(state, config, now, 0)
  const moved = r.tokens - units * policy.windowMs
  const tokens = units > 0 ? Math.min(r.tokens, Math.max(-config.capacity, moved)) : Math.min(config.capacity, moved)
  return chargedOutcome(tokenBucket, { tokens, last: r.last }, policy, now)
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

export const tokenBucket: Kernel<TokenBucketState> = { fields: 2, fresh, consume, charge, recoversAt, write, read }
