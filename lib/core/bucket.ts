import type { LimitConfig } from './config.js'

/** A token bucket's state as a value: `tokens` left at tick `last`. */
export interface Bucket {
  readonly tokens: number
  readonly last: number
}

/** The outcome of a take: the decision, the wait in ticks when refused, and the new state. */
export interface Take {
  readonly ok: boolean
  readonly retry: number
  readonly tokens: number
  readonly last: number
}

/** The subset of a configuration that a take reads. */
export type BucketShape = Pick<LimitConfig, 'capacity' | 'refill' | 'interval'>

export function bucket (tokens: number, last: number): Bucket {
  return { tokens, last }
}

export function newBucket (capacity: number, now: number): Bucket {
  return { tokens: capacity, last: now }
}

/**
 * Refills by whole intervals only, so `last` advances by whole steps and the fraction of a step is
 * kept for the next call; a clock that steps back refills nothing. A refusal still returns the
 * refilled state, which the caller stores.
 */
export function take (state: Bucket, config: BucketShape, now: number, cost: number): Take {
  const { capacity, refill, interval } = config
  // min(capacity, tokens + steps * refill) holds with 0 steps too: a stored state above capacity is capped.
  let tokens = Math.min(capacity, state.tokens)
  let last = state.last
  if (now > last) {
    const steps = Math.floor((now - last) / interval)
    if (steps > 0) {
      // When steps * refill exceeds the safe range the float result is still >= capacity (rounding
      // is monotonic), so the cap keeps the answer exact.
      tokens = Math.min(capacity, tokens + steps * refill)
      last = last + steps * interval
    }
  }
  if (tokens >= cost) return { ok: true, retry: 0, tokens: tokens - cost, last }
  return { ok: false, retry: Math.ceil(((cost - tokens) * interval) / refill), tokens, last }
}
