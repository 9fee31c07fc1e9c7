import t from 'tap'
import fc from 'fast-check'
import { isDeepStrictEqual } from 'node:util'
import { bucket, newBucket, take, limitConfig } from '../../lib/core/index.js'
import type { Bucket, BucketShape, Take } from '../../lib/core/index.js'

// Reference model of the seed's lim_take, in BigInt so no step can round.
function refTake (b: Bucket, c: BucketShape, now: number, cost: number): Take {
  const [cap, refill, ivl, n, k] = [c.capacity, c.refill, c.interval, now, cost].map(BigInt) as [bigint, bigint, bigint, bigint, bigint]
  let last = BigInt(b.last)
  const steps = n > last ? (n - last) / ivl : 0n
  let tokens = BigInt(b.tokens) + steps * refill
  if (tokens > cap) tokens = cap
  last += steps * ivl
  if (tokens >= k) return { ok: true, retry: 0, tokens: Number(tokens - k), last: Number(last) }
  const retry = ((k - tokens) * ivl + refill - 1n) / refill // ceil, numerator > 0
  return { ok: false, retry: Number(retry), tokens: Number(tokens), last: Number(last) }
}

// The earliest extra wait (in ticks) after which `cost` succeeds from the state a take returned.
function exactWait (r: Take, c: BucketShape, now: number, cost: number): number {
  const deficit = BigInt(cost - r.tokens)
  if (deficit <= 0n) return 0
  const steps = (deficit + BigInt(c.refill) - 1n) / BigInt(c.refill)
  const w = steps * BigInt(c.interval) - (BigInt(now) - BigInt(r.last))
  return Number(w > 0n ? w : 0n)
}

const cfg = (capacity: number, refill: number, interval: number): BucketShape => limitConfig(capacity, refill, interval, 1)
const after = (r: Take): Bucket => bucket(r.tokens, r.last)

t.test('bucket and newBucket are plain values', async (t) => {
  t.same(bucket(3, 17), { tokens: 3, last: 17 })
  t.same(newBucket(10, 1234), { tokens: 10, last: 1234 })
})

t.test('take: table from the seed', async (t) => {
  const c = cfg(10, 2, 100)
  t.same(take(newBucket(10, 0), c, 0, 1), { ok: true, retry: 0, tokens: 9, last: 0 }, 'full bucket, no time passed')
  t.same(take(newBucket(10, 0), c, 0, 10), { ok: true, retry: 0, tokens: 0, last: 0 }, 'whole capacity at once')
  t.same(take(bucket(0, 0), c, 99, 1), { ok: false, retry: 50, tokens: 0, last: 0 }, 'less than one step refills nothing')
  t.same(take(bucket(0, 0), c, 100, 1), { ok: true, retry: 0, tokens: 1, last: 100 }, 'one step refills `refill`')
  t.same(take(bucket(0, 0), c, 250, 1), { ok: true, retry: 0, tokens: 3, last: 200 }, 'fraction of a step is kept')
  t.same(take(bucket(0, 0), c, 250, 5), { ok: false, retry: 50, tokens: 4, last: 200 }, 'refusal returns the refilled state')
  t.same(take(bucket(7, 0), c, 1e9, 1), { ok: true, retry: 0, tokens: 9, last: 1e9 }, 'refill capped at capacity')
  t.same(take(bucket(3, 500), c, 100, 1), { ok: true, retry: 0, tokens: 2, last: 500 }, 'clock stepped back refills nothing')
  t.same(take(bucket(3, 500), c, 500, 4), { ok: false, retry: 50, tokens: 3, last: 500 }, 'now == last refills nothing')
  t.same(take(bucket(0, 0), cfg(5, 3, 7), 0, 5), { ok: false, retry: 12, tokens: 0, last: 0 }, 'retry = ceil(5 * 7 / 3)')
  t.same(take(bucket(12, 0), cfg(5, 1, 10), 0, 1), { ok: true, retry: 0, tokens: 4, last: 0 }, 'tokens above capacity are capped even with no step')
})

t.test('take: huge step counts stay exact thanks to the cap', async (t) => {
  const c = cfg(1e6, 1e6, 1)
  t.same(take(bucket(0, 0), c, Number.MAX_SAFE_INTEGER, 1), { ok: true, retry: 0, tokens: 1e6 - 1, last: Number.MAX_SAFE_INTEGER })
})

t.test('the seed\'s retry is an estimate, not the exact wait', async (t) => {
  // refill > 1: ceil(1 * 10 / 2) = 5 ticks, but tokens only arrive after a whole interval (10).
  const c = cfg(2, 2, 10)
  const r = take(bucket(1, 0), c, 0, 2)
  t.same(r, { ok: false, retry: 5, tokens: 1, last: 0 })
  t.equal(take(after(r), c, 0 + r.retry, 2).ok, false, 'retry 5 is too early')
  t.equal(take(after(r), c, 10, 2).ok, true, 'the exact wait is 10')
  // An elapsed fraction of a step is not credited: 9 of 10 ticks have passed.
  const d = cfg(1, 1, 10)
  const s = take(bucket(0, 0), d, 9, 1)
  t.same(s, { ok: false, retry: 10, tokens: 0, last: 0 })
  t.equal(take(after(s), d, 10, 1).ok, true, 'one tick is enough')
})

// Arbitraries: moderate numbers, with small ranges mixed in so refusals and steps are common.
const small = (max: number): fc.Arbitrary<number> => fc.oneof(fc.integer({ min: 1, max: 10 }), fc.integer({ min: 1, max }))
const shape = fc.record({ capacity: small(1e6), refill: small(1e6), interval: small(1e6) })
const op = fc.record({ dt: fc.oneof(fc.integer({ min: 0, max: 30 }), fc.integer({ min: -1e6, max: 1e7 })), cost: fc.integer({ min: 1, max: 1e6 }) })
const run = fc.record({ c: shape, start: fc.integer({ min: 0, max: 1e12 }), ops: fc.array(op, { maxLength: 40 }) })
const clampCost = (cost: number, c: BucketShape): number => ((cost - 1) % c.capacity) + 1

t.test('property: matches the BigInt model and is deterministic on arbitrary states', async (t) => {
  const state = fc.record({ tokens: fc.integer({ min: 0, max: 2e6 }), last: fc.integer({ min: 0, max: 1e12 }) })
  fc.assert(fc.property(shape, state, fc.integer({ min: 0, max: 1e12 }), fc.integer({ min: 1, max: 2e6 }), (c, s, now, cost) => {
    const b = bucket(s.tokens, s.last)
    const r = take(b, c, now, cost)
    return isDeepStrictEqual(r, refTake(b, c, now, cost)) &&
      isDeepStrictEqual(take(bucket(s.tokens, s.last), { ...c }, now, cost), r) &&
      b.tokens === s.tokens && b.last === s.last // input not mutated
  }), { numRuns: 200 })
  t.pass('holds')
})

t.test('property: sequences from newBucket keep 0 <= tokens <= capacity, last moves by whole intervals', async (t) => {
  fc.assert(fc.property(run, ({ c, start, ops }) => {
    let b = newBucket(c.capacity, start)
    let now = start
    for (const { dt, cost } of ops) {
      now = Math.max(0, now + dt)
      const k = clampCost(cost, c)
      const r = take(b, c, now, k)
      const m = refTake(b, c, now, k)
      if (r.ok !== m.ok || r.retry !== m.retry || r.tokens !== m.tokens || r.last !== m.last) return false
      if (r.tokens < 0 || r.tokens > c.capacity) return false
      const moved = r.last - b.last
      if (moved < 0 || moved % c.interval !== 0 || r.last > Math.max(now, b.last)) return false
      if (r.ok !== (r.retry === 0)) return false
      b = after(r)
    }
    return true
  }), { numRuns: 200 })
  t.pass('holds')
})

t.test('property: the exact wait from the model, retry within one interval of it', async (t) => {
  fc.assert(fc.property(run, fc.integer({ min: 1, max: 1e6 }), fc.integer({ min: -1e6, max: 1e6 }), ({ c, start, ops }, cost, dt) => {
    let b = newBucket(c.capacity, start)
    let now = start
    for (const o of ops) {
      now = Math.max(0, now + o.dt)
      b = after(take(b, c, now, clampCost(o.cost, c)))
    }
    now = Math.max(0, now + dt)
    const k = clampCost(cost, c)
    const r = take(b, c, now, k)
    if (r.ok) return r.retry === 0
    const w = exactWait(r, c, now, k)
    // Nothing else consumed: the refused state is kept and the same cost is tried again.
    if (!take(after(r), c, now + w, k).ok) return false
    if (w > 0 && take(after(r), c, now + w - 1, k).ok) return false
    if (now >= r.last && Math.abs(r.retry - w) >= c.interval) return false
    return true
  }), { numRuns: 300 })
  t.pass('holds')
})

t.test('property: with refill = 1 retry is never too early, and exact when last == now', async (t) => {
  const c1 = fc.record({ capacity: small(1e6), refill: fc.constant(1), interval: small(1e6) })
  fc.assert(fc.property(c1, fc.integer({ min: 0, max: 1e6 }), fc.integer({ min: 0, max: 1e12 }), fc.integer({ min: 0, max: 2e6 }), fc.integer({ min: 1, max: 1e6 }),
    (c, tokens, last, elapsed, cost) => {
      const k = clampCost(cost, c)
      const now = last + elapsed
      const r = take(bucket(Math.min(tokens, c.capacity), last), c, now, k)
      if (r.ok) return true
      if (!take(after(r), c, now + r.retry, k).ok) return false
      if (now === r.last && take(after(r), c, now + r.retry - 1, k).ok) return false
      return r.retry - exactWait(r, c, now, k) === now - r.last
    }), { numRuns: 300 })
  t.pass('holds')
})
