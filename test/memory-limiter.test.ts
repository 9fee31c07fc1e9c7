import t from 'tap'
import fc from 'fast-check'
import { TokenBucketLimiter, ADMITTED, LIMITED, SATURATED, type Outcome } from '../lib/token-bucket.js'
import { SlotTable } from '../lib/slot-table.js'
import type { RatePolicy } from '../lib/options.js'

// ---------------------------------------------------------------------------------------------
// A reference model of one client's bucket, in BigInt: `level` counts 1/windowMs of a token,
// `limit` such units come back per millisecond, `burst × windowMs` at most. It never forgets.

interface Decision { outcome: Outcome, retryMs: number, remaining: number, resetMs: number }

const ceilDiv = (a: bigint, b: bigint): bigint => (a + b - 1n) / b

class ModelBucket {
  level: bigint
  last: number
  constructor (readonly policy: RatePolicy, now: number) {
    this.level = BigInt(policy.burst) * BigInt(policy.windowMs)
    this.last = now
  }

  get capacity (): bigint { return BigInt(this.policy.burst) * BigInt(this.policy.windowMs) }

  refill (now: number): void {
    if (now <= this.last) return
    const level = this.level + BigInt(now - this.last) * BigInt(this.policy.limit)
    this.level = level < this.capacity ? level : this.capacity
    this.last = now
  }

  consume (now: number, cost: number): Decision {
    this.refill(now)
    const need = BigInt(cost) * BigInt(this.policy.windowMs)
    const limit = BigInt(this.policy.limit)
    let outcome: Outcome = LIMITED
    let retryMs = 0
    if (this.level >= need) {
      this.level -= need
      outcome = ADMITTED
    } else {
      retryMs = Number(ceilDiv(need - this.level, limit))
    }
    return {
      outcome,
      retryMs,
      remaining: Number(this.level / BigInt(this.policy.windowMs)),
      resetMs: Number(ceilDiv(this.capacity - this.level, limit))
    }
  }

  /** The first millisecond at which the bucket is full (and so equal to a new one). */
  recoversAt (): number {
    return this.last + Number(ceilDiv(this.capacity - this.level, BigInt(this.policy.limit)))
  }

  fullAt (now: number): boolean {
    return this.recoversAt() <= now
  }
}

const decision = (limiter: TokenBucketLimiter, outcome: Outcome): Decision =>
  ({ outcome, retryMs: limiter.retryMs, remaining: limiter.remaining, resetMs: limiter.resetMs })

// ---------------------------------------------------------------------------------------------

t.test('100 per minute with burst 20: 20 at once, then exactly one every 600 ms', async (t) => {
  const limiter = new TokenBucketLimiter({ limit: 100, windowMs: 60_000, burst: 20 }, 100)
  for (let i = 0; i < 20; i++) {
    t.equal(limiter.consume('a', 0, 1), ADMITTED, `request ${i + 1} at 0 ms`)
    t.equal(limiter.remaining, 19 - i)
    t.equal(limiter.resetMs, 600 * (i + 1))
    t.equal(limiter.retryMs, 0)
  }
  t.equal(limiter.consume('a', 0, 1), LIMITED, 'the 21st')
  t.equal(limiter.retryMs, 600)
  t.equal(limiter.remaining, 0)
  t.equal(limiter.resetMs, 12_000)
  t.equal(limiter.consume('a', 1, 1), LIMITED)
  t.equal(limiter.retryMs, 599)
  t.equal(limiter.consume('a', 599, 1), LIMITED)
  t.equal(limiter.retryMs, 1, 'one millisecond short')
  t.equal(limiter.resetMs, 11_401)
  t.equal(limiter.consume('a', 600, 1), ADMITTED, 'exactly at 600 ms')
  t.equal(limiter.remaining, 0)
  t.equal(limiter.resetMs, 12_000)
  for (let k = 2; k <= 50; k++) {
    const at = 600 * k
    t.equal(limiter.consume('a', at - 1, 1), LIMITED, `${at - 1} ms`)
    t.equal(limiter.retryMs, 1)
    t.equal(limiter.consume('a', at, 1), ADMITTED, `${at} ms`)
    t.equal(limiter.consume('a', at, 1), LIMITED, `second at ${at} ms`)
    t.equal(limiter.retryMs, 600)
  }
  // Idle for 6 s: ten tokens back, not more.
  const later = 600 * 50 + 6000
  for (let i = 0; i < 10; i++) t.equal(limiter.consume('a', later, 1), ADMITTED)
  t.equal(limiter.consume('a', later, 1), LIMITED)
  t.equal(limiter.retryMs, 600)
  // Idle for an hour: the burst, not more.
  for (let i = 0; i < 20; i++) t.equal(limiter.consume('a', later + 3_600_000, 1), ADMITTED)
  t.equal(limiter.consume('a', later + 3_600_000, 1), LIMITED)
})

t.test('refill is continuous: fractions of a token are kept, no drift', async (t) => {
  // 3 per second, burst 2: one token every 333⅓ ms.
  const limiter = new TokenBucketLimiter({ limit: 3, windowMs: 1000, burst: 2 }, 10)
  t.equal(limiter.consume('a', 0, 2), ADMITTED)
  t.equal(limiter.consume('a', 0, 1), LIMITED)
  t.equal(limiter.retryMs, 334)
  t.equal(limiter.consume('a', 333, 1), LIMITED)
  t.equal(limiter.retryMs, 1)
  t.equal(limiter.consume('a', 334, 1), ADMITTED)
  t.equal(limiter.consume('a', 334, 1), LIMITED)
  t.equal(limiter.retryMs, 333, '2/3 ms of refill was kept')
  t.equal(limiter.consume('a', 666, 1), LIMITED)
  t.equal(limiter.consume('a', 667, 1), ADMITTED)
  t.equal(limiter.consume('a', 667, 1), LIMITED)
  t.equal(limiter.retryMs, 333)
  t.equal(limiter.consume('a', 999, 1), LIMITED)
  t.equal(limiter.consume('a', 1000, 1), ADMITTED)
  t.equal(limiter.consume('a', 1000, 1), LIMITED)
  t.equal(limiter.retryMs, 334, 'three per second exactly: the pattern starts again')

  // A client that always retries after exactly retryMs gets the burst plus exactly 3 per second.
  const greedy = new TokenBucketLimiter({ limit: 3, windowMs: 1000, burst: 2 }, 10)
  let now = 0
  let admitted = 0
  while (now <= 60_000) {
    if (greedy.consume('g', now, 1) === ADMITTED) admitted++
    else now += greedy.retryMs
  }
  t.equal(admitted, 2 + 3 * 60)
})

t.test('a full bucket refills no further', async (t) => {
  // Burst 1 at 3 per second: full after 333⅓ ms; a client that comes back at 334 ms has lost the rest.
  const limiter = new TokenBucketLimiter({ limit: 3, windowMs: 1000, burst: 1 }, 10)
  t.equal(limiter.consume('a', 0, 1), ADMITTED)
  t.equal(limiter.consume('a', 334, 1), ADMITTED)
  t.equal(limiter.consume('a', 334, 1), LIMITED)
  t.equal(limiter.retryMs, 334)
  let now = 0
  let admitted = 0
  const greedy = new TokenBucketLimiter({ limit: 3, windowMs: 1000, burst: 1 }, 10)
  while (now <= 60_000) {
    if (greedy.consume('g', now, 1) === ADMITTED) admitted++
    else now += greedy.retryMs
  }
  t.equal(admitted, 180, 'one every 334 ms: 0, 334, …, 59 786')
})

t.test('cost takes several tokens; remaining counts cost-1 requests', async (t) => {
  const limiter = new TokenBucketLimiter({ limit: 10, windowMs: 1000, burst: 20 }, 10)
  t.equal(limiter.consume('a', 0, 7), ADMITTED)
  t.equal(limiter.remaining, 13)
  t.equal(limiter.resetMs, 700)
  t.equal(limiter.consume('a', 0, 7), ADMITTED)
  t.equal(limiter.remaining, 6)
  t.equal(limiter.consume('a', 0, 7), LIMITED)
  t.equal(limiter.retryMs, 100, 'one token short at 10 per second')
  t.equal(limiter.remaining, 6, 'a refusal takes nothing')
  t.equal(limiter.consume('a', 0, 6), ADMITTED, 'a smaller cost still fits')
  t.equal(limiter.remaining, 0)
  t.equal(limiter.resetMs, 2000)
  t.equal(limiter.consume('a', 0, 20), LIMITED)
  t.equal(limiter.retryMs, 2000, 'the whole burst: 2 s')
  t.equal(limiter.consume('a', 1999, 20), LIMITED)
  t.equal(limiter.retryMs, 1)
  t.equal(limiter.consume('a', 2000, 20), ADMITTED)
})

t.test('the shape: units of 1/windowMs token, interval 1', async (t) => {
  const policy = { limit: 7, windowMs: 3000, burst: 5 }
  const limiter = new TokenBucketLimiter(policy, 10)
  t.equal(limiter.policy, policy)
  t.same(limiter.shape, { capacity: 15_000, refill: 7, interval: 1 })
  t.equal(limiter.table.maxIdentities, 10)
  t.equal(limiter.table.size, 0)
  limiter.consume('a', 0, 1)
  t.equal(limiter.table.size, 1)
})

t.test('keys never share buckets', async (t) => {
  const limiter = new TokenBucketLimiter({ limit: 1, windowMs: 60_000, burst: 1 }, 1000)
  // Keys that a hash, a prefix or a case fold could confuse.
  const keys = ['', 'a', 'A', 'a ', ' a', 'ab', 'ba', '1.2.3.4', '1.2.3.40', '::1', '__proto__', 'constructor', 'toString', '\u0000', 'é', 'e\u0301']
  for (const key of keys) t.equal(limiter.consume(key, 0, 1), ADMITTED, JSON.stringify(key))
  for (const key of keys) t.equal(limiter.consume(key, 0, 1), LIMITED, `${JSON.stringify(key)} again`)
  t.equal(limiter.table.size, keys.length)
  const slots = new Set(keys.map((key) => limiter.table.find(key)))
  t.equal(slots.size, keys.length, 'one slot each')
  t.notOk(slots.has(-1))
  t.equal(limiter.table.find('unknown'), -1)
})

// ---------------------------------------------------------------------------------------------
// Properties against the model.

const policyArb: fc.Arbitrary<RatePolicy> = fc
  .record({ limit: fc.integer({ min: 1, max: 1_000_000 }), windowMs: fc.integer({ min: 1, max: 2 ** 31 }) })
  .chain(({ limit, windowMs }) =>
    // burst × windowMs up to (nearly) the largest the options allow; room is left for `now + retryMs`.
    fc.integer({ min: 1, max: Math.min(1_000_000, Math.floor((Number.MAX_SAFE_INTEGER - 2 ** 42) / windowMs)) })
      .map((burst) => ({ limit, windowMs, burst })))

const smallPolicyArb: fc.Arbitrary<RatePolicy> = fc.record({
  limit: fc.integer({ min: 1, max: 50 }),
  windowMs: fc.integer({ min: 1, max: 5000 }),
  burst: fc.integer({ min: 1, max: 20 })
})

/** A history of consumes: which key, how long after the previous one, what cost (a share of burst). */
const opsArb = (keys: number, maxLength: number): fc.Arbitrary<Array<{ key: number, dt: number, share: number }>> =>
  fc.array(fc.record({
    key: fc.integer({ min: 0, max: keys - 1 }),
    dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 1000 }), fc.integer({ min: 0, max: 10_000_000 }), fc.integer({ min: 0, max: 2 ** 36 })),
    share: fc.double({ min: 0, max: 1, noNaN: true })
  }), { maxLength })

const costOf = (policy: RatePolicy, share: number): number => Math.max(1, Math.min(policy.burst, Math.ceil(share * policy.burst)))

t.test('property: every decision equals the model, per key', async (t) => {
  fc.assert(fc.property(policyArb, opsArb(4, 40), (policy, ops) => {
    const limiter = new TokenBucketLimiter(policy, 1000)
    const models = new Map<number, ModelBucket>()
    let now = 0
    for (const op of ops) {
      now += op.dt
      const cost = costOf(policy, op.share)
      let model = models.get(op.key)
      if (model === undefined) models.set(op.key, model = new ModelBucket(policy, now))
      const got = decision(limiter, limiter.consume(`k${op.key}`, now, cost))
      const want = model.consume(now, cost)
      if (got.outcome !== want.outcome || got.retryMs !== want.retryMs || got.remaining !== want.remaining || got.resetMs !== want.resetMs) {
        throw new Error(`at ${now} cost ${cost}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`)
      }
    }
  }), { numRuns: 500 })
  t.pass('500 runs')
})

t.test('property: retryMs is exact — after retryMs the same cost passes, one ms earlier it does not', async (t) => {
  let limitedSeen = 0
  fc.assert(fc.property(policyArb, opsArb(1, 15), fc.double({ min: 0, max: 1, noNaN: true }), (policy, ops, share) => {
    // Two keys with the same history are two identical buckets (keys never share).
    const limiter = new TokenBucketLimiter(policy, 10)
    let now = 0
    for (const op of ops) {
      now += op.dt
      const cost = costOf(policy, op.share)
      const a = limiter.consume('a', now, cost)
      const b = limiter.consume('b', now, cost)
      if (a !== b) throw new Error('two keys with one history decided differently')
    }
    let cost = costOf(policy, share)
    if (limiter.consume('a', now, cost) === ADMITTED) {
      if (limiter.consume('b', now, cost) !== ADMITTED) throw new Error('b differs from a')
      // The bucket is short of at least one token now: the whole burst is refused.
      cost = policy.burst
      if (limiter.consume('a', now, cost) !== LIMITED) throw new Error('the burst passed right after a take')
    }
    limitedSeen++
    const retry = limiter.retryMs
    if (!Number.isSafeInteger(retry) || retry < 1) throw new Error(`retryMs ${retry}`)
    if (limiter.consume('b', now, cost) !== LIMITED || limiter.retryMs !== retry) throw new Error('b differs from a')
    if (limiter.consume('a', now + retry - 1, cost) !== LIMITED) throw new Error(`passed at retryMs - 1 = ${retry - 1}`)
    if (limiter.retryMs !== 1) throw new Error(`at retryMs - 1 the wait is ${limiter.retryMs}, not 1`)
    if (limiter.consume('b', now + retry, cost) !== ADMITTED) throw new Error(`refused after waiting retryMs = ${retry}`)
  }), { numRuns: 1000 })
  t.equal(limitedSeen, 1000, 'every run checked a refusal')
})

// ---------------------------------------------------------------------------------------------
// The bound: maxIdentities.

const P: RatePolicy = { limit: 100, windowMs: 60_000, burst: 20 } // a token every 600 ms; worst recovery 12 s

type Op = [key: string, now: number, cost: number]
function replay (ops: Op[], maxIdentities: number, policy: RatePolicy = P): TokenBucketLimiter {
  const limiter = new TokenBucketLimiter(policy, maxIdentities)
  for (const [key, now, cost] of ops) limiter.consume(key, now, cost)
  return limiter
}

t.test('a full table refuses a new client with the exact wait for the earliest recovery', async (t) => {
  const history: Op[] = [
    ['A', 0, 5], // full again at 3000
    ['B', 10, 2], // full again at 1210: the earliest
    ['C', 20, 3] // full again at 1820
  ]
  const limiter = replay(history, 3)
  t.equal(limiter.table.size, 3)
  t.equal(limiter.consume('D', 100, 1), SATURATED)
  t.equal(limiter.retryMs, 1110, '1210 - 100')
  t.equal(limiter.remaining, 0)
  t.equal(limiter.resetMs, 1110)
  t.equal(limiter.table.size, 3, 'the refused client is not tracked')
  t.equal(limiter.table.find('D'), -1)

  const saturated: Op[] = [...history, ['D', 100, 1]]
  // One millisecond early: still refused, with 1 ms to go.
  const early = replay(saturated, 3)
  t.equal(early.consume('D', 1209, 1), SATURATED)
  t.equal(early.retryMs, 1)
  // On time: admitted into B's slot; B had recovered, so dropping it changed nothing.
  const onTime = replay(saturated, 3)
  const slotOfB = onTime.table.find('B')
  t.equal(onTime.consume('D', 1210, 2), ADMITTED) // D full again at 2410
  t.equal(onTime.remaining, 18, 'a new client gets a full bucket')
  t.equal(onTime.table.find('B'), -1, 'B was dropped')
  t.equal(onTime.table.find('D'), slotOfB, 'and its slot reused')
  t.equal(onTime.table.size, 3)
  t.equal(onTime.table.data.length, 3 * 2, 'no growth')
  // B comes back: its bucket is a new, full one — the same decision it would have had.
  t.equal(onTime.consume('B', 1210, 1), SATURATED, 'the table is full again: A, C, D are live')
  // D's bucket arrived after the table last looked; the wait may be the worst case, never earlier than C's.
  t.ok(onTime.retryMs >= 1820 - 1210 && onTime.retryMs <= 12_000, `retryMs ${onTime.retryMs}`)
  t.equal(onTime.consume('B', 1820, 20), ADMITTED, 'C recovered: B gets its full burst')
})

t.test('a live bucket is never reset or changed by saturation', async (t) => {
  const history: Op[] = [['A', 0, 20], ['B', 0, 19], ['C', 0, 1]]
  const control = replay(history, 3)
  const limiter = replay(history, 3)
  // A flood of new clients while every bucket is live.
  for (let now = 0; now < 600; now += 7) {
    for (let i = 0; i < 20; i++) {
      t.equal(limiter.consume(`new-${now}-${i}`, now, 1), SATURATED)
      if (limiter.retryMs < 1 || now + limiter.retryMs < 600) t.fail(`at ${now} retryMs ${limiter.retryMs} is too early (C recovers at 600)`)
    }
  }
  t.equal(limiter.table.size, 3)
  for (const [key, now, cost] of [['A', 300, 1], ['B', 300, 2], ['C', 300, 20], ['A', 1500, 2], ['B', 2000, 20]] as Op[]) {
    const want = decision(control, control.consume(key, now, cost))
    const got = decision(limiter, limiter.consume(key, now, cost))
    t.same(got, want, `${key} at ${now} cost ${cost}`)
  }
})

t.test('touching the earliest bucket falls back to the worst-case wait, never too early', async (t) => {
  const limiter = replay([['A', 0, 1], ['B', 0, 20]], 2) // A full at 600, B at 12 000
  t.equal(limiter.consume('C', 0, 1), SATURATED)
  t.equal(limiter.retryMs, 600)
  t.equal(limiter.consume('A', 0, 1), ADMITTED) // A is now full at 1200
  t.equal(limiter.consume('C', 0, 1), SATURATED)
  t.equal(limiter.retryMs, 12_000, 'the remembered 600 would be too early; the worst case is not')
  t.ok(limiter.retryMs >= 1200)
  // One ms later the table may look again and knows exactly.
  t.equal(limiter.consume('C', 1, 1), SATURATED)
  t.equal(limiter.retryMs, 1199)
  // Touching another bucket (B, refused here) does not change the earliest recovery.
  t.equal(limiter.consume('B', 1, 1), LIMITED)
  t.equal(limiter.consume('C', 1, 1), SATURATED)
  t.equal(limiter.retryMs, 1199)
  t.equal(limiter.consume('C', 1199, 1), SATURATED)
  t.equal(limiter.retryMs, 1)
  t.equal(limiter.consume('C', 1200, 1), ADMITTED)
  t.equal(limiter.table.find('A'), -1)
  t.not(limiter.table.find('B'), -1, 'B is live and kept')
})

t.test('a touched earliest bucket: the worst-case wait is honest and can be tight', async (t) => {
  const history: Op[] = [['A', 0, 1], ['C', 0, 1]] // A full at 600; C refused
  const limiter = replay(history, 1)
  t.equal(limiter.retryMs, 600)
  t.equal(limiter.consume('A', 0, 19), ADMITTED) // A emptied at 0: full at exactly 0 + 12 000
  t.equal(limiter.consume('C', 0, 1), SATURATED)
  t.equal(limiter.retryMs, 12_000)
  const saturated: Op[] = [...history, ['A', 0, 19], ['C', 0, 1]]
  const early = replay(saturated, 1)
  t.equal(early.consume('C', 11_999, 1), SATURATED)
  t.equal(early.retryMs, 1)
  t.equal(replay(saturated, 1).consume('C', 12_000, 1), ADMITTED, 'at now + retryMs a slot is had')
})

t.test('a large table looks at most once per size/1000 ms, and says so', async (t) => {
  // 1000 per second, burst 1: a cost-1 bucket is full again after 1 ms.
  const policy: RatePolicy = { limit: 1000, windowMs: 1000, burst: 1 }
  const limiter = new TokenBucketLimiter(policy, 2500)
  for (let i = 0; i < 2500; i++) t.equal(limiter.consume(`c${i}`, 0, 1), ADMITTED)
  t.equal(limiter.table.size, 2500)
  t.equal(limiter.consume('new', 0, 1), SATURATED)
  t.equal(limiter.retryMs, 3, 'every bucket recovers at 1, but the next sweep may run at 0 + ceil(2500 / 1000)')
  t.equal(limiter.consume('new', 2, 1), SATURATED)
  t.equal(limiter.retryMs, 1)
  t.equal(limiter.consume('new', 3, 1), ADMITTED)
  t.equal(limiter.table.size, 1, 'the sweep dropped every recovered bucket')
})

// BUG(lib/slot-table.ts): a sweep that drops every bucket leaves `earliest = +Infinity`. The
// freed slots are then refilled by new clients, but `insert` only sweeps when `now >= earliest`
// (or the earliest bucket was touched), so once the table is full again no sweep ever runs: every
// new client is refused for good with `waitMs = Infinity` (the plugin then sends
// `Retry-After: Infinity` on a 503). Expected to fail until lib is fixed.
t.test('after a sweep that dropped everything, the table still frees recovered buckets', async (t) => {
  const limiter = replay([['A', 0, 1]], 1)
  t.equal(limiter.consume('B', 10_000, 1), ADMITTED, 'A recovered: B takes its slot')
  t.equal(limiter.consume('C', 10_001, 1), SATURATED)
  t.equal(limiter.retryMs, 599, 'B is full again at 10 600')
  t.ok(Number.isFinite(limiter.retryMs))
  t.equal(limiter.consume('C', 10_600, 1), ADMITTED, 'B recovered: C takes its slot')
  t.equal(limiter.consume('D', 1_000_000_000, 1), ADMITTED, 'much later, surely')
})

// BUG(lib/slot-table.ts), same cause: a bucket put into a freed slot after a sweep is not part of
// the remembered earliest recovery, so a new client is refused (and told to wait for a later bucket)
// while the table holds a bucket that has recovered — the issue allows a refusal only "when the
// registry is full of live buckets". Expected to fail until lib is fixed.
t.test('a new client is refused only while every tracked bucket is live', async (t) => {
  const limiter = replay([['A', 0, 20], ['B', 0, 1]], 2) // A full at 12 000, B at 600
  t.equal(limiter.consume('C', 600, 1), ADMITTED, 'B recovered: C takes its slot; C full at 1200')
  t.equal(limiter.consume('D', 1200, 1), ADMITTED, 'C recovered at 1200: D takes its slot')
  t.equal(limiter.table.find('C'), -1)
})

t.test('property: saturation never resets a live bucket, refuses only when full of live buckets, and its wait is honest', async (t) => {
  let saturations = 0
  fc.assert(fc.property(
    smallPolicyArb,
    fc.integer({ min: 1, max: 4 }),
    fc.array(fc.record({ key: fc.integer({ min: 0, max: 7 }), dt: fc.integer({ min: 0, max: 400 }), share: fc.double({ min: 0, max: 1, noNaN: true }) }), { maxLength: 40 }),
    (policy, maxIdentities, rawOps) => {
      const limiter = new TokenBucketLimiter(policy, maxIdentities)
      const models = new Map<string, ModelBucket>()
      const ops: Op[] = []
      let now = 0
      for (const raw of rawOps) {
        now += raw.dt
        const key = `k${raw.key}`
        const cost = costOf(policy, raw.share)
        ops.push([key, now, cost])
        const outcome = limiter.consume(key, now, cost)
        if (outcome === SATURATED) {
          saturations++
          const retry = limiter.retryMs
          if (models.has(key) && !models.get(key)!.fullAt(now)) throw new Error(`${key} is live but was not found`)
          const live = [...models.values()].filter((m) => !m.fullAt(now)).length
          if (live < maxIdentities) throw new Error(`refused at ${now} with only ${live} of ${maxIdentities} buckets live`)
          if (!Number.isSafeInteger(retry) || retry < 1) throw new Error(`retryMs ${retry}`)
          const earliest = Math.min(...[...models.values()].filter((m) => !m.fullAt(now)).map((m) => m.recoversAt()))
          if (now + retry < earliest) throw new Error(`retryMs ${retry} at ${now}: no bucket recovers before ${earliest}`)
          const retried = replay(ops, maxIdentities, policy)
          if (retried.consume(key, now + retry, cost) === SATURATED) throw new Error(`still refused after retryMs ${retry}`)
          continue
        }
        let model = models.get(key)
        if (model === undefined) models.set(key, model = new ModelBucket(policy, now))
        const want = model.consume(now, cost)
        const got = decision(limiter, outcome)
        if (got.outcome !== want.outcome || got.retryMs !== want.retryMs || got.remaining !== want.remaining || got.resetMs !== want.resetMs) {
          throw new Error(`${key} at ${now} cost ${cost}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`)
        }
        if (limiter.table.size > maxIdentities) throw new Error('over the bound')
      }
    }), { numRuns: 1000 })
  t.ok(saturations > 100, `the property saw ${saturations} saturations`)
})

// ---------------------------------------------------------------------------------------------
// The slot table's storage.

t.test('the slot table grows past its first 1024 slots and keeps every state', async (t) => {
  const limiter = new TokenBucketLimiter({ limit: 1, windowMs: 60_000, burst: 20 }, 5000)
  t.equal(limiter.table.data.length, 1024 * 2, 'starts with 1024 slots')
  const n = 3000
  for (let i = 0; i < n; i++) {
    t.equal(limiter.consume(`c${i}`, 0, (i % 20) + 1), ADMITTED)
    if (i === 1023) t.equal(limiter.table.data.length, 1024 * 2, 'still 1024 slots with 1024 clients')
    if (i === 1024) t.equal(limiter.table.data.length, 2048 * 2, 'doubled for the 1025th')
  }
  t.equal(limiter.table.data.length, 4096 * 2)
  t.equal(limiter.table.size, n)
  const slots = new Set<number>()
  let wrong = 0
  for (let i = 0; i < n; i++) {
    slots.add(limiter.table.find(`c${i}`))
    const spent = (i % 20) + 1
    const outcome = limiter.consume(`c${i}`, 0, 1)
    if (outcome !== (spent < 20 ? ADMITTED : LIMITED) || limiter.remaining !== Math.max(0, 19 - spent)) wrong++
  }
  t.equal(wrong, 0, 'every client kept its own state through the copies')
  t.equal(slots.size, n)
})

t.test('the slot table never allocates more than maxIdentities slots', async (t) => {
  const small = new SlotTable(2, 10, { recoversAt: () => Number.POSITIVE_INFINITY, worstRecovery: 5 })
  t.equal(small.data.length, 20)
  const mid = new TokenBucketLimiter(P, 1500)
  for (let i = 0; i < 1500; i++) mid.consume(`c${i}`, 0, 1)
  t.equal(mid.table.data.length, 1500 * 2, 'grows to the bound, not to 2048')
  t.equal(mid.consume('one-more', 0, 1), SATURATED)
  t.equal(mid.table.data.length, 1500 * 2)
  t.equal(mid.table.size, 1500)
})

t.test('SlotTable alone: insert, find, touched and the wait it reports', async (t) => {
  // States that recover at a time stored in the slot's first field.
  const table = new SlotTable(1, 2, { recoversAt: (data, slot) => data[slot]!, worstRecovery: 1000 })
  const a = table.insert('a', 0)
  table.data[a] = 50
  const b = table.insert('b', 0)
  table.data[b] = 80
  t.not(a, b)
  t.equal(table.find('a'), a)
  t.equal(table.size, 2)
  t.equal(table.insert('c', 10), -1)
  t.equal(table.waitMs, 40)
  table.data[a] = 500
  table.touched(a)
  t.equal(table.insert('c', 10), -1)
  t.equal(table.waitMs, 1000, 'earliest changed within the same ms: the worst case')
  t.equal(table.insert('c', 11), -1)
  t.equal(table.waitMs, 69, 'swept again: b is the earliest now')
  const c = table.insert('c', 80)
  t.equal(c, b)
  t.equal(table.find('b'), -1)
})
