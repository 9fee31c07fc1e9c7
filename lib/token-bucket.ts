import { take, type BucketShape } from './core/index.js'
import type { RatePolicy } from './options.js'
import { SlotTable } from './slot-table.js'

/** The outcome of `consume`, in whole milliseconds and whole tokens. */
export const ADMITTED = 0
export const LIMITED = 1
/** Every slot holds a live bucket: the client cannot be tracked yet. */
export const SATURATED = 2
export type Outcome = typeof ADMITTED | typeof LIMITED | typeof SATURATED

const TOKENS = 0
const LAST = 1

/**
 * Per-client token buckets on the core's `take`. The bucket counts in 1/windowMs of a token and
 * refills `limit` such units per millisecond, so `take` runs with `interval = 1`: the refill is
 * continuous to the millisecond and its `retry` is the exact wait in milliseconds.
 */
export class TokenBucketLimiter {
  readonly policy: RatePolicy
  readonly shape: BucketShape
  readonly table: SlotTable
  // Results of the last `consume`, read right after it (no allocation per request).
  /** Milliseconds until the same cost passes (LIMITED), or until a slot frees (SATURATED). */
  retryMs = 0
  /** Whole cost-1 requests the client could make right now. */
  remaining = 0
  /** Milliseconds until the bucket is full again if nothing else is taken. */
  resetMs = 0

  constructor (policy: RatePolicy, maxIdentities: number) {
    this.policy = policy
    const capacity = policy.burst * policy.windowMs
    const shape = { capacity, refill: policy.limit, interval: 1 }
    this.shape = shape
    this.table = new SlotTable(2, maxIdentities, {
      recoversAt: (data, slot) => data[slot * 2 + LAST]! + Math.ceil((capacity - data[slot * 2 + TOKENS]!) / shape.refill),
      worstRecovery: Math.ceil(capacity / shape.refill)
    })
  }

  consume (key: string, now: number, cost: number): Outcome {
    const table = this.table
    const unit = this.policy.windowMs
    let slot = table.find(key)
    if (slot === -1) {
      slot = table.insert(key, now)
      if (slot === -1) {
        this.retryMs = table.waitMs
        this.remaining = 0
        this.resetMs = table.waitMs
        return SATURATED
      }
      table.data[slot * 2 + TOKENS] = this.shape.capacity
      table.data[slot * 2 + LAST] = now
    } else {
      table.touched(slot)
    }
    const data = table.data
    const base = slot * 2
    const result = take({ tokens: data[base + TOKENS]!, last: data[base + LAST]! }, this.shape, now, cost * unit)
    data[base + TOKENS] = result.tokens
    data[base + LAST] = result.last
    this.remaining = Math.floor(result.tokens / unit)
    this.resetMs = Math.ceil((this.shape.capacity - result.tokens) / this.shape.refill)
    this.retryMs = result.retry
    return result.ok ? ADMITTED : LIMITED
  }
}
