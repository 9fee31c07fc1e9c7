// The one place the micro-benchmarks touch lib's per-client registry (the gate's memory limiter):
// a token bucket per key over the slot table.
import { tokenBucket } from '../lib/core/index.js'
import { ADMITTED, MemoryLimiter } from '../lib/backends/memory/memory-limiter.js'

export interface BenchLimiter {
  /** True when admitted. */
  consume (key: string, now: number, cost: number): boolean
  readonly size: number
}

export function tokenBucketLimiter (policy: { limit: number, windowMs: number, burst: number }, maxIdentities: number): BenchLimiter {
  const limiter = new MemoryLimiter(tokenBucket, { algorithm: 'token-bucket', ...policy }, maxIdentities)
  return {
    consume: (key, now, cost) => limiter.consume(key, now, cost) === ADMITTED,
    get size () { return limiter.table.size }
  }
}
