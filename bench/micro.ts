// Core `take` throughput: `node --import tsx bench/micro.ts` (run.ts pins it to one core).
// Prints one JSON line (MicroResult).
import { take, type Bucket, type BucketShape } from '../lib/core/index.js'
import { type BenchLimiter, tokenBucketLimiter } from './limiter.js'

export interface MicroResult {
  /** Median over batches of core `take` calls per second. */
  takeOpsPerSec: number
  takeBatches: number[]
  /** Median over batches of the gate's memory limiter `consume` calls per second, random keys from a pool. */
  consumeOpsPerSec: number
  consumeKeys: number
  checksum: number
}

const TAKE_BATCH = 20_000_000
const CONSUME_BATCH = 2_000_000
const CONSUME_KEYS = 100_000

function median (values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[sorted.length >> 1]!
}

/**
 * The state is carried from one call to the next and `now` and `cost` change every call, so no
 * call can be folded away; the sum of the results is printed.
 */
function takeBatch (n: number, seed: number): { opsPerSec: number, sum: number } {
  const shape: BucketShape = { capacity: 1_000_000, refill: 3, interval: 2 }
  let state: Bucket = take({ tokens: 1_000_000, last: 0 }, shape, 0, 1)
  let sum = 0
  let now = seed
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < n; i++) {
    now += i & 3
    const result = take(state, shape, now, 1 + (i & 7))
    sum += result.retry + (result.ok ? 1 : 0)
    state = result
  }
  const ns = Number(process.hrtime.bigint() - t0)
  return { opsPerSec: n / (ns / 1e9), sum: sum + state.tokens }
}

function consumeBatch (limiter: BenchLimiter, keys: string[], n: number, start: number): { opsPerSec: number, sum: number } {
  let sum = 0
  let x = 0x9e3779b9 ^ start
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < n; i++) {
    x ^= x << 13; x ^= x >>> 17; x ^= x << 5
    sum += limiter.consume(keys[(x >>> 0) % keys.length]!, start + (i >> 10), 1) ? 1 : 0
  }
  const ns = Number(process.hrtime.bigint() - t0)
  return { opsPerSec: n / (ns / 1e9), sum }
}

let checksum = 0
takeBatch(TAKE_BATCH / 4, 1) // warm-up
const takeBatches: number[] = []
for (let b = 0; b < 5; b++) {
  const r = takeBatch(TAKE_BATCH, b)
  takeBatches.push(r.opsPerSec)
  checksum += r.sum
}

const keys: string[] = []
for (let i = 0; i < CONSUME_KEYS; i++) keys.push(`10.${(i >>> 16) & 255}.${(i >>> 8) & 255}.${i & 255}`)
const limiter = tokenBucketLimiter({ limit: 1e9, windowMs: 60_000, burst: 1e9 }, 1_000_000)
consumeBatch(limiter, keys, CONSUME_BATCH / 2, 0) // warm-up, and every key gets its bucket
const consumeBatches: number[] = []
for (let b = 0; b < 5; b++) {
  const r = consumeBatch(limiter, keys, CONSUME_BATCH, 1000 * (b + 1))
  consumeBatches.push(r.opsPerSec)
  checksum += r.sum
}

const out: MicroResult = {
  takeOpsPerSec: median(takeBatches),
  takeBatches,
  consumeOpsPerSec: median(consumeBatches),
  consumeKeys: CONSUME_KEYS,
  checksum
}
process.stdout.write(JSON.stringify(out) + '\n')
