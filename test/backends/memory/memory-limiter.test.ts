import t from 'tap'
import fc from 'fast-check'
import { MemoryLimiter, ADMITTED, LIMITED, SATURATED, worstRecovery, type Verdict } from '../../../lib/backends/memory/memory-limiter.js'
import { StateTable } from '../../../lib/backends/memory/state-table.js'
import { kernelOf, type Algorithm, type Kernel, type Policy } from '../../../lib/core/rates/index.js'
import { capacityOf, normalizePolicy } from '../../../lib/rates/policy.js'

const ALGORITHMS: readonly Algorithm[] = ['token-bucket', 'fixed-window', 'sliding-window-counter', 'gcra']
const hasBurst = (algorithm: Algorithm): boolean => algorithm === 'token-bucket' || algorithm === 'gcra'

/** Keys of the property tests: half IPv4 addresses (held as integers), half other strings. */
const keyName = (i: number): string => i % 2 === 0 ? `k${i}` : `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`

const limiterFor = (policy: Policy, maxIdentities: number): MemoryLimiter =>
  new MemoryLimiter(kernelOf(policy.algorithm), policy, maxIdentities)

const tokenBucket = (limit: number, windowMs: number, burst: number): Policy =>
  ({ algorithm: 'token-bucket', limit, windowMs, burst })

interface Decision { verdict: Verdict, retryAfterMs: number, remaining: number, resetAt: number }

const decision = (limiter: MemoryLimiter, verdict: Verdict): Decision =>
  ({ verdict, retryAfterMs: limiter.retryAfterMs, remaining: limiter.remaining, resetAt: limiter.resetAt })

const same = (a: Decision, b: Decision): boolean =>
  a.verdict === b.verdict && a.retryAfterMs === b.retryAfterMs && a.remaining === b.remaining && a.resetAt === b.resetAt

type Op = [key: string, now: number, cost: number]

function replay (ops: readonly Op[], maxIdentities: number, policy: Policy): MemoryLimiter {
  const limiter = limiterFor(policy, maxIdentities)
  for (const [key, now, cost] of ops) limiter.consume(key, now, cost)
  return limiter
}

/** A cost from 1 to the policy's capacity, as a share of that capacity. */
const costOf = (policy: Policy, share: number): number => {
  const capacity = capacityOf(policy)
  return Math.max(1, Math.min(capacity, Math.ceil(share * capacity)))
}

// =============================================================================================
// Token bucket: continuous to the millisecond. A reference model in BigInt: `level` counts
// 1/windowMs of a token, `limit` such units come back per millisecond, `burst × windowMs` at most.
// It never forgets.

const ceilDiv = (a: bigint, b: bigint): bigint => (a + b - 1n) / b

class ModelBucket {
  level: bigint
  last: number
  readonly burst: number
  constructor (readonly policy: Policy, now: number) {
    this.burst = policy.burst ?? policy.limit
    this.level = this.capacity
    this.last = now
  }

  get capacity (): bigint { return BigInt(this.burst) * BigInt(this.policy.windowMs) }

  refill (now: number): void {
    if (now <= this.last) return
    const level = this.level + BigInt(now - this.last) * BigInt(this.policy.limit)
    this.level = level < this.capacity ? level : this.capacity
    this.last = now
  }

  consume (now: number, cost: number): Decision {
    this.refill(now)
    const need = BigInt(cost) * BigInt(this.policy.windowMs)
    let verdict: Verdict = LIMITED
    let retryAfterMs = 0
    if (this.level >= need) {
      this.level -= need
      verdict = ADMITTED
    } else {
      retryAfterMs = Number(ceilDiv(need - this.level, BigInt(this.policy.limit)))
    }
    return { verdict, retryAfterMs, remaining: Number(this.level / BigInt(this.policy.windowMs)), resetAt: this.recoversAt() }
  }

  /** The first millisecond at which the bucket is full (and so equal to a new one). */
  recoversAt (): number {
    return this.last + Number(ceilDiv(this.capacity - this.level, BigInt(this.policy.limit)))
  }
}

t.test('token bucket, 100 per minute with burst 20: 20 at once, then exactly one every 600 ms', async (t) => {
  const limiter = limiterFor(tokenBucket(100, 60_000, 20), 100)
  for (let i = 0; i < 20; i++) {
    t.equal(limiter.consume('a', 0, 1), ADMITTED, `request ${i + 1} at 0 ms`)
    t.equal(limiter.remaining, 19 - i)
    t.equal(limiter.resetAt, 600 * (i + 1), 'full again 600 ms per token spent')
    t.equal(limiter.retryAfterMs, 0)
  }
  t.equal(limiter.consume('a', 0, 1), LIMITED, 'the 21st')
  t.equal(limiter.retryAfterMs, 600)
  t.equal(limiter.remaining, 0)
  t.equal(limiter.resetAt, 12_000)
  t.equal(limiter.consume('a', 1, 1), LIMITED)
  t.equal(limiter.retryAfterMs, 599)
  t.equal(limiter.resetAt, 12_000, 'resetAt is a tick: a refusal does not move it')
  t.equal(limiter.consume('a', 599, 1), LIMITED)
  t.equal(limiter.retryAfterMs, 1, 'one millisecond short')
  t.equal(limiter.resetAt, 12_000)
  t.equal(limiter.consume('a', 600, 1), ADMITTED, 'exactly at 600 ms')
  t.equal(limiter.remaining, 0)
  t.equal(limiter.resetAt, 12_600)
  for (let k = 2; k <= 50; k++) {
    const at = 600 * k
    t.equal(limiter.consume('a', at - 1, 1), LIMITED, `${at - 1} ms`)
    t.equal(limiter.retryAfterMs, 1)
    t.equal(limiter.consume('a', at, 1), ADMITTED, `${at} ms`)
    t.equal(limiter.consume('a', at, 1), LIMITED, `second at ${at} ms`)
    t.equal(limiter.retryAfterMs, 600)
    t.equal(limiter.resetAt, at + 12_000)
  }
  // Idle for 6 s: ten tokens back, not more.
  const later = 600 * 50 + 6000
  for (let i = 0; i < 10; i++) t.equal(limiter.consume('a', later, 1), ADMITTED)
  t.equal(limiter.consume('a', later, 1), LIMITED)
  t.equal(limiter.retryAfterMs, 600)
  // Idle for an hour: the burst, not more.
  for (let i = 0; i < 20; i++) t.equal(limiter.consume('a', later + 3_600_000, 1), ADMITTED)
  t.equal(limiter.consume('a', later + 3_600_000, 1), LIMITED)
})

t.test('token bucket: refill is continuous, fractions of a token are kept, no drift', async (t) => {
  // 3 per second, burst 2: one token every 333⅓ ms.
  const limiter = limiterFor(tokenBucket(3, 1000, 2), 10)
  t.equal(limiter.consume('a', 0, 2), ADMITTED)
  t.equal(limiter.consume('a', 0, 1), LIMITED)
  t.equal(limiter.retryAfterMs, 334)
  t.equal(limiter.consume('a', 333, 1), LIMITED)
  t.equal(limiter.retryAfterMs, 1)
  t.equal(limiter.consume('a', 334, 1), ADMITTED)
  t.equal(limiter.consume('a', 334, 1), LIMITED)
  t.equal(limiter.retryAfterMs, 333, '2/3 ms of refill was kept')
  t.equal(limiter.consume('a', 666, 1), LIMITED)
  t.equal(limiter.consume('a', 667, 1), ADMITTED)
  t.equal(limiter.consume('a', 667, 1), LIMITED)
  t.equal(limiter.retryAfterMs, 333)
  t.equal(limiter.consume('a', 999, 1), LIMITED)
  t.equal(limiter.consume('a', 1000, 1), ADMITTED)
  t.equal(limiter.consume('a', 1000, 1), LIMITED)
  t.equal(limiter.retryAfterMs, 334, 'three per second exactly: the pattern starts again')

  // A client that always retries after exactly retryAfterMs gets the burst plus exactly 3 per second.
  const greedy = limiterFor(tokenBucket(3, 1000, 2), 10)
  let now = 0
  let admitted = 0
  while (now <= 60_000) {
    if (greedy.consume('g', now, 1) === ADMITTED) admitted++
    else now += greedy.retryAfterMs
  }
  t.equal(admitted, 2 + 3 * 60)
})

t.test('token bucket: a full bucket refills no further', async (t) => {
  // Burst 1 at 3 per second: full after 333⅓ ms; a client that comes back at 334 ms has lost the rest.
  const limiter = limiterFor(tokenBucket(3, 1000, 1), 10)
  t.equal(limiter.consume('a', 0, 1), ADMITTED)
  t.equal(limiter.resetAt, 334)
  t.equal(limiter.consume('a', 334, 1), ADMITTED)
  t.equal(limiter.consume('a', 334, 1), LIMITED)
  t.equal(limiter.retryAfterMs, 334)
  let now = 0
  let admitted = 0
  const greedy = limiterFor(tokenBucket(3, 1000, 1), 10)
  while (now <= 60_000) {
    if (greedy.consume('g', now, 1) === ADMITTED) admitted++
    else now += greedy.retryAfterMs
  }
  t.equal(admitted, 180, 'one every 334 ms: 0, 334, …, 59 786')
})

t.test('token bucket: cost takes several tokens; remaining counts cost-1 requests', async (t) => {
  const limiter = limiterFor(tokenBucket(10, 1000, 20), 10)
  t.equal(limiter.consume('a', 0, 7), ADMITTED)
  t.equal(limiter.remaining, 13)
  t.equal(limiter.resetAt, 700)
  t.equal(limiter.consume('a', 0, 7), ADMITTED)
  t.equal(limiter.remaining, 6)
  t.equal(limiter.consume('a', 0, 7), LIMITED)
  t.equal(limiter.retryAfterMs, 100, 'one token short at 10 per second')
  t.equal(limiter.remaining, 6, 'a refusal takes nothing')
  t.equal(limiter.consume('a', 0, 6), ADMITTED, 'a smaller cost still fits')
  t.equal(limiter.remaining, 0)
  t.equal(limiter.resetAt, 2000)
  t.equal(limiter.consume('a', 0, 20), LIMITED)
  t.equal(limiter.retryAfterMs, 2000, 'the whole burst: 2 s')
  t.equal(limiter.consume('a', 1999, 20), LIMITED)
  t.equal(limiter.retryAfterMs, 1)
  t.equal(limiter.consume('a', 2000, 20), ADMITTED)
  t.equal(limiter.resetAt, 4000)
})

// =============================================================================================
// Every algorithm through the limiter.

t.test('the limiter: its policy, one slot of the kernel\'s fields per identity, its bound', async (t) => {
  const fields: Record<Algorithm, number> = { 'token-bucket': 2, 'fixed-window': 2, 'sliding-window-counter': 3, gcra: 1 }
  for (const algorithm of ALGORITHMS) {
    const policy = normalizePolicy({ algorithm, limit: 7, windowMs: 3000 })
    const limiter = limiterFor(policy, 10)
    t.equal(limiter.policy, policy, `${algorithm}: the policy given`)
    t.equal(limiter.table.fields, fields[algorithm], `${algorithm}: ${fields[algorithm]} numbers per identity`)
    t.equal(limiter.table.maxIdentities, 10)
    t.equal(limiter.table.data.length, 10 * fields[algorithm], 'no more slots than the bound')
    t.equal(limiter.table.size, 0)
    t.same([limiter.retryAfterMs, limiter.remaining, limiter.resetAt], [0, 0, 0], 'no decision yet')
    t.equal(limiter.consume('a', 5000, 1), ADMITTED)
    t.equal(limiter.table.size, 1)
    t.equal(limiter.remaining, 6)
    t.equal(limiter.retryAfterMs, 0)
    t.ok(limiter.resetAt > 5000, `${algorithm}: resetAt is a tick after now: ${limiter.resetAt}`)
    const big = limiterFor(policy, 1_000_000)
    t.equal(big.table.data.length, 1024 * fields[algorithm], `${algorithm}: starts with 1024 slots`)
  }
})

t.test('each algorithm: first decisions, with resetAt as an absolute tick', async (t) => {
  // A fresh identity at 1250, 10 per 100 ms (burst 4 where there is one), cost 3 then 3 then 3.
  const want: Record<Algorithm, Array<[Verdict, remaining: number, retryAfterMs: number, resetAt: number]>> = {
    // 10 per 100 ms: a token every 10 ms; burst 4.
    'token-bucket': [[ADMITTED, 1, 0, 1280], [LIMITED, 1, 20, 1280], [LIMITED, 1, 20, 1280]],
    // Window [1200, 1300): 3, 6, 9 of 10.
    'fixed-window': [[ADMITTED, 7, 0, 1300], [ADMITTED, 4, 0, 1300], [ADMITTED, 1, 0, 1300]],
    'sliding-window-counter': [[ADMITTED, 7, 0, 1400], [ADMITTED, 4, 0, 1400], [ADMITTED, 1, 0, 1400]],
    // Emission interval 10 ms, tolerance 40 ms.
    gcra: [[ADMITTED, 1, 0, 1280], [LIMITED, 1, 20, 1280], [LIMITED, 1, 20, 1280]]
  }
  for (const algorithm of ALGORITHMS) {
    const policy = normalizePolicy(hasBurst(algorithm) ? { algorithm, limit: 10, windowMs: 100, burst: 4 } : { algorithm, limit: 10, windowMs: 100 })
    const limiter = limiterFor(policy, 4)
    const got = [1250, 1250, 1250].map((now) => {
      const verdict = limiter.consume('a', now, 3)
      return [verdict, limiter.remaining, limiter.retryAfterMs, limiter.resetAt]
    })
    t.same(got, want[algorithm], algorithm)
    // The fourth cost-3 request of a window algorithm: 9 + 3 > 10.
    if (!hasBurst(algorithm)) {
      t.equal(limiter.consume('a', 1250, 3), LIMITED)
      t.equal(limiter.retryAfterMs, algorithm === 'fixed-window' ? 50 : 50 + 23, `${algorithm}: the wait`)
    }
  }
})

t.test('keys never share states, for every algorithm', async (t) => {
  // Keys that a hash, a prefix or a case fold could confuse.
  const keys = ['', 'a', 'A', 'a ', ' a', 'ab', 'ba', '1.2.3.4', '1.2.3.40', '::1', '__proto__', 'constructor', 'toString', '\u0000', 'é', 'e\u0301']
  for (const algorithm of ALGORITHMS) {
    const limiter = limiterFor(normalizePolicy({ algorithm, limit: 1, windowMs: 60_000 }), 1000)
    let wrong = 0
    for (const key of keys) if (limiter.consume(key, 0, 1) !== ADMITTED) wrong++
    for (const key of keys) if (limiter.consume(key, 0, 1) !== LIMITED) wrong++
    t.equal(wrong, 0, `${algorithm}: each key admitted once, then limited`)
    t.equal(limiter.table.size, keys.length)
    const slots = new Set(keys.map((key) => limiter.table.find(key)))
    t.equal(slots.size, keys.length, 'one slot each')
    t.notOk(slots.has(-1))
    t.equal(limiter.table.find('unknown'), -1)
  }
})

t.test('worstRecovery: the longest any state takes to recover, per algorithm', async (t) => {
  t.same(['token-bucket', 'gcra', 'fixed-window', 'sliding-window-counter'].map((algorithm) => worstRecovery({ algorithm: algorithm as 'gcra', limit: 100, windowMs: 60_000 }, true)), [120_000, 120_000, 120_000, 180_000], 'with a debt of one capacity')
  t.equal(worstRecovery({ algorithm: 'token-bucket', limit: 100, windowMs: 60_000, burst: 20 }), 12_000)
  t.equal(worstRecovery({ algorithm: 'token-bucket', limit: 3, windowMs: 1000, burst: 2 }), 667, 'rounded up')
  t.equal(worstRecovery({ algorithm: 'token-bucket', limit: 100, windowMs: 60_000 }), 60_000, 'burst defaults to limit')
  t.equal(worstRecovery({ algorithm: 'gcra', limit: 100, windowMs: 60_000, burst: 20 }), 12_000)
  t.equal(worstRecovery({ algorithm: 'gcra', limit: 3, windowMs: 1000, burst: 2 }), 667)
  t.equal(worstRecovery({ algorithm: 'gcra', limit: 7, windowMs: 1000 }), 1000)
  t.equal(worstRecovery({ algorithm: 'fixed-window', limit: 5, windowMs: 1000 }), 1000)
  t.equal(worstRecovery({ algorithm: 'sliding-window-counter', limit: 5, windowMs: 1000 }), 2000, 'the current count slides out after two windows')
  // Tight: an identity emptied at `now` needs exactly that long (window algorithms: at a window's start).
  for (const algorithm of ALGORITHMS) {
    const policy = normalizePolicy({ algorithm, limit: 3, windowMs: 1000 })
    const kernel = kernelOf(policy.algorithm)
    const emptied = kernel.consume(kernel.fresh(policy, 5000), policy, 5000, capacityOf(policy))
    t.equal(kernel.recoversAt(emptied.state, policy) - 5000, worstRecovery(policy), algorithm)
  }
})

// =============================================================================================
// Properties against the models.

const bigTokenBucketArb: fc.Arbitrary<Policy> = fc
  .record({ limit: fc.integer({ min: 1, max: 1_000_000 }), windowMs: fc.integer({ min: 1, max: 2 ** 31 }) })
  .chain(({ limit, windowMs }) =>
    // burst × windowMs up to (nearly) the largest the validator allows; room is left for `now + retryAfterMs`.
    fc.integer({ min: 1, max: Math.min(1_000_000, Math.floor((Number.MAX_SAFE_INTEGER - 2 ** 42) / windowMs)) })
      .map((burst) => tokenBucket(limit, windowMs, burst)))

/** A history of consumes: which key, how long after the previous one, what cost (a share of capacity). */
const opsArb = (keys: number, maxLength: number): fc.Arbitrary<Array<{ key: number, dt: number, share: number }>> =>
  fc.array(fc.record({
    key: fc.integer({ min: 0, max: keys - 1 }),
    dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 1000 }), fc.integer({ min: 0, max: 10_000_000 }), fc.integer({ min: 0, max: 2 ** 36 })),
    share: fc.double({ min: 0, max: 1, noNaN: true })
  }), { maxLength })

t.test('property: token bucket, every decision equals the BigInt model, per key', async (t) => {
  fc.assert(fc.property(bigTokenBucketArb, opsArb(4, 40), (policy, ops) => {
    const limiter = limiterFor(policy, 1000)
    const models = new Map<number, ModelBucket>()
    let now = 0
    for (const op of ops) {
      now += op.dt
      const cost = costOf(policy, op.share)
      let model = models.get(op.key)
      if (model === undefined) models.set(op.key, model = new ModelBucket(policy, now))
      const got = decision(limiter, limiter.consume(keyName(op.key), now, cost))
      const want = model.consume(now, cost)
      if (!same(got, want)) throw new Error(`at ${now} cost ${cost}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`)
    }
  }), { numRuns: 500 })
  t.pass('500 runs')
})

/** Realistic policies of every algorithm (all valid), on an epoch clock up to the year 2100. */
const realisticPolicyArb: fc.Arbitrary<Policy> = fc.record({
  algorithm: fc.constantFrom(...ALGORITHMS),
  limit: fc.oneof(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 2000 })),
  windowMs: fc.oneof(fc.integer({ min: 1, max: 1000 }), fc.integer({ min: 1, max: 86_400_000 })),
  burst: fc.oneof(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 10_000 }))
}).map(({ algorithm, limit, windowMs, burst }) =>
  normalizePolicy(hasBurst(algorithm) ? { algorithm, limit, windowMs, burst } : { algorithm, limit, windowMs }))

t.test('property: retryAfterMs is exact, for every algorithm — after it the same cost passes, one ms earlier it does not', async (t) => {
  const limited: Record<string, number> = {}
  fc.assert(fc.property(
    realisticPolicyArb,
    fc.integer({ min: 0, max: 4_000_000_000_000 }),
    fc.array(fc.record({ dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 1000 }), fc.integer({ min: 0, max: 10_000_000 })), share: fc.double({ min: 0, max: 1, noNaN: true }) }), { maxLength: 15 }),
    fc.double({ min: 0, max: 1, noNaN: true }),
    (policy, start, ops, share) => {
      // Two keys with the same history are two identical states (keys never share).
      const limiter = limiterFor(policy, 10)
      let now = start
      for (const op of ops) {
        now += op.dt
        const cost = costOf(policy, op.share)
        const a = decision(limiter, limiter.consume('a', now, cost))
        const b = decision(limiter, limiter.consume('b', now, cost))
        if (!same(a, b)) throw new Error('two keys with one history decided differently')
      }
      let cost = costOf(policy, share)
      if (limiter.consume('a', now, cost) === ADMITTED) {
        if (limiter.consume('b', now, cost) !== ADMITTED) throw new Error('b differs from a')
        // Something was just consumed: the whole capacity is refused now, in every algorithm.
        cost = capacityOf(policy)
        if (limiter.consume('a', now, cost) !== LIMITED) throw new Error('the whole capacity passed right after a consume')
      }
      limited[policy.algorithm] = (limited[policy.algorithm] ?? 0) + 1
      const retry = limiter.retryAfterMs
      if (!Number.isSafeInteger(retry) || retry < 1) throw new Error(`retryAfterMs ${retry}`)
      if (limiter.resetAt < now + retry) throw new Error(`resetAt ${limiter.resetAt} before the retry at ${now + retry}`)
      if (limiter.consume('b', now, cost) !== LIMITED || limiter.retryAfterMs !== retry) throw new Error('b differs from a')
      if (limiter.consume('a', now + retry - 1, cost) !== LIMITED) throw new Error(`passed at retryAfterMs - 1 = ${retry - 1}`)
      if (limiter.retryAfterMs !== 1) throw new Error(`at retryAfterMs - 1 the wait is ${limiter.retryAfterMs}, not 1`)
      if (limiter.consume('b', now + retry, cost) !== ADMITTED) throw new Error(`refused after waiting retryAfterMs = ${retry}`)
    }), { numRuns: 2000 })
  for (const algorithm of ALGORITHMS) t.ok((limited[algorithm] ?? 0) > 200, `${algorithm}: ${limited[algorithm] ?? 0} refusals checked`)
})

// =============================================================================================
// The bound: maxIdentities.

const P = tokenBucket(100, 60_000, 20) // a token every 600 ms; worst recovery 12 s

t.test('token bucket: a full table refuses a new client with the exact wait for the earliest recovery', async (t) => {
  const history: Op[] = [
    ['A', 0, 5], // full again at 3000
    ['B', 10, 2], // full again at 1210: the earliest
    ['C', 20, 3] // full again at 1820
  ]
  const limiter = replay(history, 3, P)
  t.equal(limiter.table.size, 3)
  t.equal(limiter.consume('D', 100, 1), SATURATED)
  t.equal(limiter.retryAfterMs, 1110, '1210 - 100')
  t.equal(limiter.remaining, 0)
  t.equal(limiter.resetAt, 1210, 'now + retryAfterMs')
  t.equal(limiter.table.size, 3, 'the refused client is not tracked')
  t.equal(limiter.table.find('D'), -1)

  const saturated: Op[] = [...history, ['D', 100, 1]]
  // One millisecond early: still refused, with 1 ms to go.
  const early = replay(saturated, 3, P)
  t.equal(early.consume('D', 1209, 1), SATURATED)
  t.equal(early.retryAfterMs, 1)
  // On time: admitted into B's slot; B had recovered, so dropping it changed nothing.
  const onTime = replay(saturated, 3, P)
  const slotOfB = onTime.table.find('B')
  t.equal(onTime.consume('D', 1210, 2), ADMITTED) // D full again at 2410
  t.equal(onTime.remaining, 18, 'a new client gets a full bucket')
  t.equal(onTime.table.find('B'), -1, 'B was dropped')
  t.equal(onTime.table.find('D'), slotOfB, 'and its slot reused')
  t.equal(onTime.table.size, 3)
  t.equal(onTime.table.data.length, 3 * 2, 'no growth')
  // B comes back: its bucket is a new, full one — the same decision it would have had.
  t.equal(onTime.consume('B', 1210, 1), SATURATED, 'the table is full again: A, C, D are live')
  // D's bucket was placed after the table last looked, and the table learned its recovery (2410) as
  // it was placed: C's 1820 is still the earliest, and nothing was touched, so the wait is exact.
  // (It used to be "between C's wait and the worst case": every insert made the table stale.)
  t.equal(onTime.retryAfterMs, 1820 - 1210, 'exactly until C recovers')
  t.equal(onTime.resetAt, 1820)
  t.equal(onTime.consume('B', 1820, 20), ADMITTED, 'C recovered: B gets its full burst')
})

/**
 * One scenario per algorithm, two slots: A and B fill the table, C is refused at `probe` with the
 * exact wait for the earliest recovery (the table learned each recovery as the state was placed,
 * and needs no look). A, the earliest, is then used again within the same millisecond: the table
 * looks again and the wait is exact. A is used once more in that millisecond: the table may not look
 * again before the next one, and its remembered time may be too soon, so it says the worst case;
 * one millisecond later it looks again and is exact.
 */
interface Saturation {
  policy: Policy
  history: Op[]
  probe: number
  /** Earliest recovery among A and B. */
  earliest: number
  /** A's use after the probe, and the earliest recovery after it once, then twice. */
  touch: Op
  earliestAfterTouch: number
  earliestAfterTwoTouches: number
}

const SCENARIOS: Record<Algorithm, Saturation> = {
  'token-bucket': {
    policy: P, // A full again at 600, B at 12 000; A used again at 0: at 1200
    history: [['A', 0, 1], ['B', 0, 20]],
    probe: 0,
    earliest: 600,
    touch: ['A', 0, 1],
    earliestAfterTouch: 1200,
    earliestAfterTwoTouches: 1800
  },
  gcra: {
    policy: { algorithm: 'gcra', limit: 100, windowMs: 60_000, burst: 20 }, // the same arithmetic, as a TAT
    history: [['A', 0, 1], ['B', 0, 20]],
    probe: 0,
    earliest: 600,
    touch: ['A', 0, 1],
    earliestAfterTouch: 1200,
    earliestAfterTwoTouches: 1800
  },
  'fixed-window': {
    // Both live counters are in the window [0, 1000): they all recover at its end.
    policy: { algorithm: 'fixed-window', limit: 20, windowMs: 1000 },
    history: [['A', 100, 1], ['B', 200, 20]],
    probe: 300,
    earliest: 1000,
    touch: ['A', 300, 1],
    earliestAfterTouch: 1000,
    earliestAfterTwoTouches: 1000
  },
  'sliding-window-counter': {
    // A counts in [0, 1000): back to 0 at 2000; B in [1000, 2000): at 3000. A used at 1300: at 3000
    // (the first in the table of the two that recover at 3000, so the earliest the table knows).
    policy: { algorithm: 'sliding-window-counter', limit: 20, windowMs: 1000 },
    history: [['A', 100, 1], ['B', 1200, 1]],
    probe: 1300,
    earliest: 2000,
    touch: ['A', 1300, 1],
    earliestAfterTouch: 3000,
    earliestAfterTwoTouches: 3000
  }
}

t.test('every algorithm: a full table refuses a new client with an honest wait, and never resets a live state', async (t) => {
  for (const algorithm of ALGORITHMS) {
    const { policy, history, probe, earliest, touch, earliestAfterTouch, earliestAfterTwoTouches } = SCENARIOS[algorithm]
    const worst = worstRecovery(policy)
    t.test(algorithm, async (t) => {
      const limiter = replay(history, 2, policy)
      t.equal(limiter.consume('C', probe, 1), SATURATED)
      t.equal(limiter.retryAfterMs, earliest - probe, 'the exact wait for the earliest recovery')
      t.equal(limiter.remaining, 0)
      t.equal(limiter.resetAt, earliest)
      t.equal(limiter.table.find('C'), -1, 'the refused client is not tracked')

      const refused: Op[] = [...history, ['C', probe, 1]]
      const early = replay(refused, 2, policy)
      t.equal(early.consume('C', earliest - 1, 1), SATURATED, 'one millisecond early')
      t.equal(early.retryAfterMs, 1)
      const onTime = replay(refused, 2, policy)
      t.equal(onTime.consume('C', earliest, 1), ADMITTED, 'on time')
      t.equal(onTime.remaining, capacityOf(policy) - 1, 'a new client gets a full state')

      // The earliest state used again in the same millisecond: the remembered time may be too soon.
      // The first refusal needed no look (nothing had recovered, nothing was stale), so the table may
      // look now, and the wait is exact. (It used to be the worst case: every insert made the table
      // stale, so the first refusal had already looked in this millisecond.)
      const touched = replay(refused, 2, policy)
      touched.consume(...touch)
      t.equal(touched.consume('C', probe, 1), SATURATED)
      t.equal(touched.retryAfterMs, earliestAfterTouch - probe, 'the table looks again: exact')
      t.equal(touched.resetAt, earliestAfterTouch)
      // Used once more in the same millisecond: the table has looked in it already and may not look
      // again before the next one, so it says the worst case — only now.
      touched.consume(...touch)
      t.equal(touched.consume('C', probe, 1), SATURATED)
      t.equal(touched.retryAfterMs, worst, `the worst case, ${worst} ms`)
      t.ok(probe + worst >= earliestAfterTwoTouches, 'which is not too early')
      t.equal(touched.consume('C', probe + 1, 1), SATURATED)
      t.equal(touched.retryAfterMs, earliestAfterTwoTouches - probe - 1, 'a millisecond later, exact again')
      const afterTouch: Op[] = [...refused, touch, ['C', probe, 1]]
      t.equal(replay(afterTouch, 2, policy).consume('C', earliestAfterTouch - 1, 1), SATURATED)
      t.equal(replay(afterTouch, 2, policy).consume('C', earliestAfterTouch, 1), ADMITTED, 'the exact wait is honest')
      const afterTwoTouches: Op[] = [...afterTouch, touch, ['C', probe, 1]]
      t.equal(replay(afterTwoTouches, 2, policy).consume('C', probe + worst, 1), ADMITTED, 'the worst-case wait is honest')
      t.equal(replay(afterTwoTouches, 2, policy).consume('C', earliestAfterTwoTouches - 1, 1), SATURATED)
      t.equal(replay(afterTwoTouches, 2, policy).consume('C', earliestAfterTwoTouches, 1), ADMITTED)

      // A flood of new clients while every state is live changes no state.
      const control = replay(history, 2, policy)
      const flooded = replay(history, 2, policy)
      let early2 = 0
      for (let now = probe; now < earliest; now += 7) {
        for (let i = 0; i < 20; i++) {
          if (flooded.consume(`new-${now}-${i}`, now, 1) !== SATURATED) t.fail(`new-${now}-${i} got a slot at ${now}`)
          if (flooded.retryAfterMs < 1 || now + flooded.retryAfterMs < earliest) early2++
        }
      }
      t.equal(early2, 0, 'no wait ends before a state recovers')
      t.equal(flooded.table.size, 2)
      const capacity = capacityOf(policy)
      for (const [key, at, cost] of [['A', earliest - 1, 1], ['B', earliest - 1, 2], ['A', earliest - 1, capacity], ['B', earliest + 500, capacity]] as Op[]) {
        t.same(decision(flooded, flooded.consume(key, at, cost)), decision(control, control.consume(key, at, cost)), `${key} at ${at} cost ${cost}: as if no flood`)
      }
    })
  }
})

t.test('token bucket: a touched earliest bucket: the worst-case wait is honest and can be tight', async (t) => {
  // The first refusal needs no look, so one use of A gives an exact wait; a second use in the same
  // millisecond is what makes the table say the worst case (which is tight here).
  const history: Op[] = [['A', 0, 1], ['C', 0, 1]] // A full at 600; C refused, with no look
  const limiter = replay(history, 1, P)
  t.equal(limiter.retryAfterMs, 600)
  t.equal(limiter.consume('A', 0, 1), ADMITTED) // A full at 1200: the table's 600 is stale
  t.equal(limiter.consume('C', 0, 1), SATURATED)
  t.equal(limiter.retryAfterMs, 1200, 'the table looks again: exact')
  t.equal(limiter.consume('A', 0, 18), ADMITTED) // A emptied at 0: full at exactly 0 + 12 000
  t.equal(limiter.consume('C', 0, 1), SATURATED)
  t.equal(limiter.retryAfterMs, 12_000, 'it may not look again in this millisecond: the worst case, here exact')
  const saturated: Op[] = [...history, ['A', 0, 1], ['C', 0, 1], ['A', 0, 18], ['C', 0, 1]]
  const early = replay(saturated, 1, P)
  t.equal(early.consume('C', 11_999, 1), SATURATED)
  t.equal(early.retryAfterMs, 1)
  t.equal(replay(saturated, 1, P).consume('C', 12_000, 1), ADMITTED, 'at now + retryAfterMs a slot is had')
})

t.test('token bucket: touching another bucket than the earliest keeps the exact wait', async (t) => {
  const limiter = replay([['A', 0, 1], ['B', 0, 20]], 2, P) // A full at 600, B at 12 000
  t.equal(limiter.consume('C', 0, 1), SATURATED)
  t.equal(limiter.retryAfterMs, 600)
  t.equal(limiter.consume('B', 1, 1), LIMITED)
  t.equal(limiter.consume('C', 1, 1), SATURATED)
  t.equal(limiter.retryAfterMs, 599)
  t.equal(limiter.consume('C', 599, 1), SATURATED)
  t.equal(limiter.retryAfterMs, 1)
  t.equal(limiter.consume('C', 600, 1), ADMITTED)
  t.equal(limiter.table.find('A'), -1)
  t.not(limiter.table.find('B'), -1, 'B is live and kept')
})

t.test('a large table looks at most once per size/1000 ms, and says so', async (t) => {
  // 1000 per second, burst 2: a bucket is full again 1 ms per token spent.
  const limiter = limiterFor(tokenBucket(1000, 1000, 2), 2500)
  t.equal(limiter.consume('c0', 0, 1), ADMITTED) // full at 1
  for (let i = 1; i < 2500; i++) if (limiter.consume(`c${i}`, 0, 2) !== ADMITTED) t.fail(`c${i}`) // full at 2
  t.equal(limiter.table.size, 2500)
  // Nothing has recovered and nothing is stale: the table refuses without a look, with the exact
  // wait. (It used to be 3, the throttle: every insert made the table stale, so this refusal swept.)
  t.equal(limiter.consume('new', 0, 1), SATURATED)
  t.equal(limiter.retryAfterMs, 1, 'c0 recovers at 1')
  // c0 has recovered: the table looks (2500 states), gives c0's slot to `new`, and may not look
  // again before 1 + ceil(2499 / 1000) = 4.
  const slotOfC0 = limiter.table.find('c0')
  t.equal(limiter.consume('new', 1, 1), ADMITTED) // full at 2
  t.equal(limiter.table.find('new'), slotOfC0)
  t.equal(limiter.table.find('c0'), -1)
  t.equal(limiter.consume('other', 1, 1), SATURATED)
  t.equal(limiter.retryAfterMs, 3, 'every bucket recovers at 2, but the next sweep may run at 4')
  t.equal(limiter.resetAt, 4)
  t.equal(limiter.consume('other', 2, 1), SATURATED)
  t.equal(limiter.retryAfterMs, 2, 'every bucket has recovered, yet the table may not look before 4')
  t.equal(limiter.consume('other', 3, 1), SATURATED)
  t.equal(limiter.retryAfterMs, 1)
  t.equal(limiter.consume('other', 4, 1), ADMITTED)
  t.equal(limiter.table.size, 1, 'the sweep dropped every recovered bucket')
})

// Regressions: a sweep that dropped every state left `earliest = +Infinity`, and states put into the
// freed slots were not part of it, so once the table was full again no sweep ever ran (every new
// client refused for good with `waitMs = Infinity`).
t.test('after a sweep that dropped everything, the table still frees recovered states', async (t) => {
  for (const algorithm of ALGORITHMS) {
    const policy = normalizePolicy({ algorithm, limit: 1, windowMs: 600 })
    const limiter = replay([['A', 0, 1]], 1, policy)
    t.equal(limiter.consume('B', 10_000, 1), ADMITTED, `${algorithm}: A recovered: B takes its slot`)
    t.equal(limiter.consume('C', 10_001, 1), SATURATED)
    t.ok(Number.isSafeInteger(limiter.retryAfterMs), `${algorithm}: a finite wait, ${limiter.retryAfterMs}`)
    const at = 10_001 + limiter.retryAfterMs
    t.equal(limiter.consume('C', at, 1), ADMITTED, `${algorithm}: B recovered: C takes its slot`)
    t.equal(limiter.consume('D', 1_000_000_000, 1), ADMITTED, 'much later, surely')
  }
})

t.test('a new client is refused only while every tracked state is live', async (t) => {
  const limiter = replay([['A', 0, 20], ['B', 0, 1]], 2, P) // A full at 12 000, B at 600
  t.equal(limiter.consume('C', 600, 1), ADMITTED, 'B recovered: C takes its slot; C full at 1200')
  t.equal(limiter.consume('D', 1200, 1), ADMITTED, 'C recovered at 1200: D takes its slot')
  t.equal(limiter.table.find('C'), -1)
})

// A reference for the table: every key's state, run by the kernel itself and never forgotten. A
// state that has recovered behaves as a fresh one, so the limiter must decide exactly as this does
// whenever it decides at all.
class KernelModel {
  state: unknown
  constructor (readonly kernel: Kernel<unknown>, readonly policy: Policy, now: number) {
    this.state = kernel.fresh(policy, now)
  }

  consume (now: number, cost: number): Decision {
    const outcome = this.kernel.consume(this.state, this.policy, now, cost)
    this.state = outcome.state
    return { verdict: outcome.allowed ? ADMITTED : LIMITED, retryAfterMs: outcome.retryAfterMs, remaining: outcome.remaining, resetAt: outcome.resetAt }
  }

  recoversAt (): number {
    return this.kernel.recoversAt(this.state, this.policy)
  }
}

const smallPolicyArb: fc.Arbitrary<Policy> = fc.record({
  algorithm: fc.constantFrom(...ALGORITHMS),
  limit: fc.integer({ min: 1, max: 12 }),
  windowMs: fc.oneof(fc.integer({ min: 1, max: 60 }), fc.integer({ min: 1, max: 2000 })),
  burst: fc.option(fc.integer({ min: 1, max: 20 }), { nil: undefined })
}).map(({ algorithm, limit, windowMs, burst }) =>
  normalizePolicy(hasBurst(algorithm) ? { algorithm, limit, windowMs, burst } : { algorithm, limit, windowMs }))

// What the table may know of the states it tracks, from outside: each state's recovery as of when
// the table last learned it (the state was placed, or a look kept it), and whether it was used since
// (its recovery can only have moved later). The table's earliest time is exact unless the state it
// learned as the earliest was used since; a look in the same millisecond makes it exact again.
class Learned {
  readonly at = new Map<string, number>()
  readonly usedSince = new Set<string>()

  get min (): number {
    return Math.min(...this.at.values())
  }

  /** Some state with the earliest learned recovery was used since the table learned it. */
  get suspect (): boolean {
    const min = this.min
    for (const [key, at] of this.at) if (at === min && this.usedSince.has(key)) return true
    return false
  }

  /** A look: the table learned every state it keeps anew. */
  looked (kept: Iterable<[string, number]>): void {
    this.at.clear()
    this.usedSince.clear()
    for (const [key, at] of kept) this.at.set(key, at)
  }
}


t.test('property, every algorithm: saturation never resets a live state, refuses only when full of live states, and every wait is exact or, only after the earliest state was used, the worst case', async (t) => {
  const seen: Record<string, { saturated: number, limited: number, exactWithoutLook: number, exactAfterLook: number, worst: number }> = {}
  for (const algorithm of ALGORITHMS) seen[algorithm] = { saturated: 0, limited: 0, exactWithoutLook: 0, exactAfterLook: 0, worst: 0 }
  fc.assert(fc.property(
    smallPolicyArb,
    fc.integer({ min: 1, max: 4 }),
    fc.array(fc.record({
      key: fc.oneof(fc.integer({ min: 0, max: 2 }), fc.integer({ min: 0, max: 7 })),
      dt: fc.oneof(
        { arbitrary: fc.constant(0), weight: 3 },
        { arbitrary: fc.integer({ min: 0, max: 50 }), weight: 3 },
        { arbitrary: fc.integer({ min: 0, max: 400 }), weight: 2 },
        { arbitrary: fc.integer({ min: 0, max: 5000 }), weight: 1 }
      ),
      share: fc.double({ min: 0, max: 1, noNaN: true })
    }), { minLength: 5, maxLength: 40, size: 'max' }),
    (policy, maxIdentities, rawOps) => {
      const kernel = kernelOf(policy.algorithm)
      // The table asks the kernel for a recovery once per state placed, and once per tracked state
      // when it looks: counting the calls tells when it looked.
      let recoveries = 0
      const counting: Kernel<unknown> = { ...kernel, recoversAt: (state, p) => { recoveries++; return kernel.recoversAt(state, p) } }
      const worst = worstRecovery(policy)
      const counts = seen[policy.algorithm]!
      const limiter = new MemoryLimiter(counting, policy, maxIdentities)
      const models = new Map<string, KernelModel>()
      const learned = new Learned()
      const ops: Op[] = []
      let now = 0
      for (const raw of rawOps) {
        now += raw.dt
        const key = keyName(raw.key)
        const cost = costOf(policy, raw.share)
        ops.push([key, now, cost])
        const at = `${key} at ${now} cost ${cost}`
        const tracked = limiter.table.find(key) !== -1
        const sizeBefore = limiter.table.size
        const before = recoveries
        const got = decision(limiter, limiter.consume(key, now, cost))
        const looks = recoveries - before - (!tracked && got.verdict !== SATURATED ? 1 : 0)
        if (looks !== 0 && (tracked || sizeBefore !== maxIdentities || looks !== sizeBefore)) throw new Error(`${at}: ${looks} recoveries asked, tracked ${String(tracked)}, ${sizeBefore} of ${maxIdentities} tracked`)
        const looked = looks > 0
        if (looked) {
          // Before this decision's own state is placed: every other state is as the models say.
          const kept: Array<[string, number]> = []
          for (const [k, m] of models) if (k !== key && limiter.table.find(k) !== -1) kept.push([k, m.recoversAt()])
          learned.looked(kept)
        }
        let model = models.get(key)
        if (got.verdict === SATURATED) {
          counts.saturated++
          const live = [...models.values()].filter((m) => m.recoversAt() > now)
          if (model !== undefined && model.recoversAt() > now) throw new Error(`${at}: live, but refused as a new client`)
          if (live.length < maxIdentities) throw new Error(`${at}: refused with only ${live.length} of ${maxIdentities} states live`)
          if (limiter.table.find(key) !== -1) throw new Error(`${at}: refused but tracked`)
          const retry = got.retryAfterMs
          if (!Number.isSafeInteger(retry) || retry < 1) throw new Error(`${at}: retryAfterMs ${retry}`)
          if (retry > Math.max(1, worst)) throw new Error(`${at}: retryAfterMs ${retry} beyond the worst recovery ${worst}`)
          if (got.remaining !== 0 || got.resetAt !== now + retry) throw new Error(`${at}: ${JSON.stringify(got)}`)
          const earliest = Math.min(...live.map((m) => m.recoversAt()))
          if (now + retry < earliest) throw new Error(`${at}: retryAfterMs ${retry}, but no state recovers before ${earliest}`)
          // Under 1000 states a look holds the next one back by 1 ms at most: never longer than the
          // wait. So the wait is exactly the time until the earliest recovery...
          const exact = Math.max(1, earliest - now)
          if (retry === exact) {
            if (looked) counts.exactAfterLook++
            else counts.exactWithoutLook++
          } else {
            // ... or, when the table may not look in this millisecond and the state it learned as
            // the earliest was used since, the worst case.
            if (looked) throw new Error(`${at}: the table looked, yet the wait ${retry} is not the exact ${exact}`)
            if (retry !== Math.max(1, worst)) throw new Error(`${at}: the wait ${retry} is neither the exact ${exact} nor the worst case ${worst}`)
            if (!learned.suspect) throw new Error(`${at}: the worst case ${retry}, but the earliest state (${learned.min}) was not used since the table learned it; exact: ${exact}`)
            counts.worst++
          }
          if (replay(ops, maxIdentities, policy).consume(key, now + retry, cost) === SATURATED) throw new Error(`${at}: still refused after retryAfterMs ${retry}`)
          continue
        }
        if (model === undefined) models.set(key, model = new KernelModel(kernel, policy, now))
        const want = model.consume(now, cost)
        if (!same(got, want)) throw new Error(`${at}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`)
        if (model.recoversAt() - now > worst) throw new Error(`${at}: recovers at ${model.recoversAt()}, beyond the worst recovery ${worst}`)
        if (tracked) {
          learned.usedSince.add(key)
        } else {
          learned.at.set(key, model.recoversAt())
          learned.usedSince.delete(key)
        }
        if (got.verdict === LIMITED) {
          counts.limited++
          const retry = got.retryAfterMs
          const retried = replay(ops, maxIdentities, policy)
          if (retried.consume(key, now + retry - 1, cost) !== LIMITED) throw new Error(`${at}: passed at retryAfterMs - 1 = ${retry - 1}`)
          if (retried.consume(key, now + retry, cost) !== ADMITTED) throw new Error(`${at}: refused after retryAfterMs ${retry}`)
        }
        if (limiter.table.size > maxIdentities) throw new Error('over the bound')
        // Live state is never evicted.
        for (const [k, m] of models) {
          if (m.recoversAt() > now && limiter.table.find(k) === -1) throw new Error(`after ${at}: ${k} is live but was dropped`)
        }
      }
    }), { numRuns: 3000 })
  for (const algorithm of ALGORITHMS) {
    const { saturated, limited, exactWithoutLook, exactAfterLook, worst } = seen[algorithm]!
    t.ok(saturated > 100, `${algorithm}: ${saturated} saturations checked`)
    t.ok(limited > 100, `${algorithm}: ${limited} refusals checked`)
    t.ok(exactWithoutLook > 50, `${algorithm}: ${exactWithoutLook} exact waits without a look`)
    t.ok(exactAfterLook > 50, `${algorithm}: ${exactAfterLook} exact waits after a look`)
    t.ok(worst > 3, `${algorithm}: ${worst} worst-case waits, each after the earliest state was used`)
  }
})

// =============================================================================================
// The slot table's storage.

t.test('the slot table grows past its first 1024 slots and keeps every state, for every algorithm', async (t) => {
  for (const algorithm of ALGORITHMS) {
    // Capacity 20 everywhere, nothing recovers within the test.
    const policy = normalizePolicy(hasBurst(algorithm)
      ? { algorithm, limit: 1, windowMs: 60_000, burst: 20 }
      : { algorithm, limit: 20, windowMs: 60_000 })
    const limiter = limiterFor(policy, 5000)
    const fields = limiter.table.fields
    t.equal(limiter.table.data.length, 1024 * fields, `${algorithm}: starts with 1024 slots`)
    const n = 3000
    let lengths = ''
    for (let i = 0; i < n; i++) {
      if (limiter.consume(keyName(i), 0, (i % 20) + 1) !== ADMITTED) t.fail(keyName(i))
      if (i === 1023) lengths += `${limiter.table.data.length / fields},`
      if (i === 1024) lengths += `${limiter.table.data.length / fields}`
    }
    t.equal(lengths, '1024,1536', 'still 1024 slots with 1024 clients, half again for the 1025th')
    t.equal(limiter.table.data.length, 3456 * fields, '1024, 1536, 2304, 3456')
    t.equal(limiter.table.size, n)
    const slots = new Set<number>()
    let wrong = 0
    for (let i = 0; i < n; i++) {
      slots.add(limiter.table.find(keyName(i)))
      const spent = (i % 20) + 1
      const verdict = limiter.consume(keyName(i), 0, 1)
      if (verdict !== (spent < 20 ? ADMITTED : LIMITED) || limiter.remaining !== Math.max(0, 19 - spent)) wrong++
    }
    t.equal(wrong, 0, `${algorithm}: every client kept its own state through the copies`)
    t.equal(slots.size, n)
  }
})

t.test('the slot table never allocates more than maxIdentities slots', async (t) => {
  const small = new StateTable(2, 10, { recoversAt: () => Number.POSITIVE_INFINITY, worstRecovery: 5 })
  t.equal(small.data.length, 20)
  for (const algorithm of ALGORITHMS) {
    const mid = limiterFor(normalizePolicy({ algorithm, limit: 100, windowMs: 60_000 }), 1500)
    const fields = mid.table.fields
    for (let i = 0; i < 1500; i++) mid.consume(`c${i}`, 0, 1)
    t.equal(mid.table.data.length, 1500 * fields, `${algorithm}: grows to the bound, not to 2048`)
    t.equal(mid.consume('one-more', 0, 1), SATURATED)
    t.equal(mid.table.data.length, 1500 * fields)
    t.equal(mid.table.size, 1500)
  }
})

t.test('StateTable alone: insert, placed, find, touched and the wait it reports', async (t) => {
  // States that recover at a time stored in the slot's first field; each look reads every state.
  let reads = 0
  const table = new StateTable(1, 2, { recoversAt: (data, slot) => { reads++; return data[slot]! }, worstRecovery: 1000 })
  const put = (slot: number, recoversAt: number): void => {
    table.data[slot] = recoversAt
    table.placed(slot, recoversAt)
  }
  t.equal(table.waitMs, 0)
  const a = table.insert('a', 0)
  put(a, 50)
  const b = table.insert('b', 0)
  put(b, 80) // not earlier than a's: a stays the earliest
  t.not(a, b)
  t.equal(table.find('a'), a)
  t.equal(table.find('b'), b)
  t.equal(table.size, 2)
  // The old table learned nothing from an insert and was stale after each: this refusal looked.
  t.equal(table.insert('c', 10), -1)
  t.equal(table.waitMs, 40, 'exact: a, placed to recover at 50, is the earliest')
  t.equal(reads, 0, 'without a look')
  t.equal(table.find('c'), -1, 'the refused key is not tracked')
  t.equal(table.size, 2)
  table.data[b] = 90
  table.touched(b)
  t.equal(table.insert('c', 10), -1)
  t.equal(table.waitMs, 40, 'b is not the earliest: using it changes nothing')
  t.equal(reads, 0)
  table.data[a] = 500
  table.touched(a)
  t.equal(table.insert('c', 10), -1)
  t.equal(table.waitMs, 80, 'a, the earliest, was used: the table looks, b (at 90) is the earliest now')
  t.equal(reads, 2, 'one look')
  table.data[b] = 95
  table.touched(b)
  t.equal(table.insert('c', 10), -1)
  t.equal(table.waitMs, 1000, 'b was used in the millisecond of the look: the worst case')
  t.equal(reads, 2, 'no second look in that millisecond')
  t.equal(table.insert('c', 11), -1)
  t.equal(table.waitMs, 84, 'a millisecond later: a look, exact again')
  t.equal(reads, 4)
  t.equal(table.insert('c', 94), -1)
  t.equal(table.waitMs, 1)
  t.equal(reads, 4, 'nothing has recovered, nothing was used: no look')
  const c = table.insert('c', 95)
  t.equal(c, b, 'b recovered at 95: c takes its slot')
  t.equal(table.find('b'), -1)
  t.equal(table.find('a'), a, 'a is live and kept')
  t.equal(reads, 6)
  put(c, 200) // earlier than a's 500, which the look learned: c is the earliest now
  t.equal(table.insert('d', 100), -1)
  t.equal(table.waitMs, 100, 'exact: c recovers at 200')
  t.equal(reads, 6)
  const d = table.insert('d', 200)
  t.equal(d, c)
  put(d, 300)
  t.equal(table.insert('e', 250), -1)
  t.equal(table.waitMs, 50, 'the look at 200 kept a (500); d placed after it recovers at 300')
  // A look that drops everything forgets every time; states placed after it are learned again.
  const e = table.insert('e', 1000)
  t.equal(table.size, 1, 'a and d recovered by 1000: both dropped')
  put(e, 1100)
  const f = table.insert('f', 1000)
  put(f, 1050)
  t.equal(table.insert('g', 1000), -1)
  t.equal(table.waitMs, 50, 'f, placed last, recovers first')
})

// A state placed while the table's earliest time is stale, and earlier than that time, is the exact
// earliest: every other state recovers at or after the stale time. `placed` lowers the time but
// keeps `stale` set, so until the table may look again it says the worst case.
t.test('StateTable: a state placed while the earliest one is stale, and earlier than it, is the exact earliest', async (t) => {
  const table = new StateTable(1, 3, { recoversAt: (data, slot) => data[slot]!, worstRecovery: 1000 })
  const put = (key: string, now: number, recoversAt: number): number => {
    const slot = table.insert(key, now)
    table.data[slot] = recoversAt
    table.placed(slot, recoversAt)
    return slot
  }
  put('a', 0, 10)
  put('b', 0, 10)
  const x = put('x', 0, 500)
  put('y', 10, 600) // a look at 10 drops a and b; x (500) is the earliest; y takes one freed slot
  table.data[x] = 700
  table.touched(x) // stale: x, the earliest, was used in the millisecond of the look
  put('z', 10, 20) // the other freed slot: z recovers at 20, before every other state
  t.equal(table.insert('w', 10), -1)
  t.ok(table.waitMs >= 10, 'never early')
  // placed() lowered the earliest below a stale one: exact again.
  t.equal(table.waitMs, 10, 'z recovers at 20: exact')
  t.equal(table.insert('w', 11), -1)
  t.equal(table.waitMs, 9, 'a millisecond later the table looks: exact')
})

// The table alone, against a model: states recover at times the test chooses (never beyond
// `worstRecovery` from the time they were set), and each use moves a state's recovery later only.
type TableOp =
  | { kind: 'new', key: number, recoverIn: number }
  | { kind: 'use', key: number, recoverIn: number }
  | { kind: 'tick', dt: number }

const TABLE_WORST = 100

/** Runs `ops` on a new table; `check` sees each op that did something, with how many states the table read. */
function runTable (maxIdentities: number, ops: readonly TableOp[], check?: (table: StateTable, index: number, now: number, reads: number) => void): { table: StateTable, now: number } {
  let reads = 0
  const table = new StateTable(1, maxIdentities, { recoversAt: (data, slot) => { reads++; return data[slot]! }, worstRecovery: TABLE_WORST })
  let now = 0
  ops.forEach((op, index) => {
    const before = reads
    if (op.kind === 'tick') {
      now += op.dt
      return
    }
    const key = keyName(op.key)
    let slot = table.find(key)
    if (op.kind === 'new') {
      if (slot !== -1) return
      slot = table.insert(key, now)
      if (slot !== -1) {
        table.data[slot] = now + op.recoverIn
        table.placed(slot, now + op.recoverIn)
      }
    } else {
      if (slot === -1) return
      table.data[slot] = Math.max(table.data[slot]!, now + op.recoverIn)
      table.touched(slot)
    }
    check?.(table, index, now, reads - before)
  })
  return { table, now }
}

t.test('property, StateTable: refuses only when full of live states, never drops one, and every wait is exact or, only after the earliest state was used, the worst case', async (t) => {
  const counts = { refused: 0, exactWithoutLook: 0, exactAfterLook: 0, worst: 0 }
  // Few keys, short recoveries and short steps: many looks that free several slots at once, and
  // many uses of the earliest state in the millisecond of a look.
  const recoverInArb = (min: number): fc.Arbitrary<number> => fc.oneof(fc.integer({ min, max: 4 }), fc.integer({ min, max: TABLE_WORST }))
  const opArb: fc.Arbitrary<TableOp> = fc.oneof(
    { arbitrary: fc.record({ kind: fc.constant('new' as const), key: fc.integer({ min: 0, max: 7 }), recoverIn: recoverInArb(1) }), weight: 4 },
    { arbitrary: fc.record({ kind: fc.constant('use' as const), key: fc.integer({ min: 0, max: 7 }), recoverIn: recoverInArb(0) }), weight: 3 },
    { arbitrary: fc.record({ kind: fc.constant('tick' as const), dt: fc.oneof(fc.constant(1), fc.integer({ min: 0, max: 5 }), fc.integer({ min: 0, max: 2 * TABLE_WORST })) }), weight: 2 }
  )
  fc.assert(fc.property(fc.integer({ min: 1, max: 5 }), fc.array(opArb, { minLength: 5, maxLength: 60 }), (maxIdentities, ops) => {
    const recovery = new Map<string, number>() // every tracked key's true recovery
    const learned = new Learned()
    runTable(maxIdentities, ops, (table, index, now, reads) => {
      const op = ops[index] as Exclude<TableOp, { kind: 'tick' }>
      const key = keyName(op.key)
      const at = `op ${index} (${JSON.stringify(op)}) at ${now}`
      if (op.kind === 'use') {
        if (reads !== 0) throw new Error(`${at}: a use read the table`)
        learned.usedSince.add(key)
        recovery.set(key, table.data[table.find(key)]!)
        return
      }
      if (reads > 0) {
        // A look: every recovered state dropped, the others learned anew.
        if (reads !== maxIdentities || recovery.size !== maxIdentities) throw new Error(`${at}: ${reads} reads with ${recovery.size} of ${maxIdentities} tracked`)
        for (const [k, r] of recovery) if (r <= now) recovery.delete(k)
        learned.looked(recovery)
      }
      for (const [k, r] of recovery) if (table.find(k) === -1) throw new Error(`${at}: ${k} (live until ${r}) was dropped`)
      const slot = table.find(key)
      if (table.size !== recovery.size + (slot === -1 ? 0 : 1)) throw new Error(`${at}: size ${table.size}, ${recovery.size} other states kept`)
      if (slot !== -1) {
        recovery.set(key, table.data[slot]!)
        learned.at.set(key, table.data[slot]!)
        learned.usedSince.delete(key)
        return
      }
      counts.refused++
      if (recovery.size !== maxIdentities) throw new Error(`${at}: refused with ${recovery.size} of ${maxIdentities} tracked`)
      const earliest = Math.min(...recovery.values())
      // Under 1000 states a look holds the next one back by 1 ms at most: a recovered state is
      // always dropped before a new key is refused.
      if (earliest <= now) throw new Error(`${at}: refused though a state recovered at ${earliest}`)
      const exact = earliest - now
      const wait = table.waitMs
      if (wait === exact) {
        if (reads > 0) counts.exactAfterLook++
        else counts.exactWithoutLook++
      } else {
        if (reads > 0) throw new Error(`${at}: the table looked, yet the wait ${wait} is not the exact ${exact}`)
        if (wait !== TABLE_WORST) throw new Error(`${at}: the wait ${wait} is neither the exact ${exact} nor the worst case`)
        if (!learned.suspect) throw new Error(`${at}: the worst case, but the earliest state (${learned.min}) was not used since the table learned it; exact: ${exact}`)
        counts.worst++
      }
      // With nothing used meanwhile, a slot is had at the earliest recovery, not a millisecond
      // before it, and after the wait the table said.
      for (const [dt, free] of [[exact - 1, false], [exact, true], [wait, true]] as const) {
        const again = runTable(maxIdentities, [...ops.slice(0, index + 1), { kind: 'tick', dt }]).table
        if ((again.insert(key, now + dt) !== -1) !== free) throw new Error(`${at}: after ${dt} ms a slot ${free ? 'was not' : 'was'} had`)
      }
    })
  }), { numRuns: 10_000 })
  t.ok(counts.refused > 5000, `${counts.refused} refusals checked`)
  t.ok(counts.exactWithoutLook > 5000, `${counts.exactWithoutLook} exact waits without a look`)
  t.ok(counts.exactAfterLook > 500, `${counts.exactAfterLook} exact waits after a look`)
  t.ok(counts.worst > 80, `${counts.worst} worst-case waits, each after the earliest state was used`)
})

t.test('StateTable.remove: an IPv4 key and any other key, each once; its slot is used again', async (t) => {
  const table = new StateTable(1, 2, { recoversAt: () => Number.POSITIVE_INFINITY, worstRecovery: 5 })
  const a = table.insert('192.168.0.1', 0)
  const b = table.insert('client-b', 0)
  t.equal(table.size, 2)
  t.equal(table.find('192.168.0.1'), a)
  t.equal(table.find('client-b'), b)
  t.equal(table.insert('10.0.0.1', 0), -1, 'full')
  t.equal(table.remove('192.168.0.1'), true)
  t.equal(table.remove('192.168.0.1'), false)
  t.equal(table.find('192.168.0.1'), -1)
  t.equal(table.insert('10.0.0.1', 0), a, 'the freed slot')
  t.equal(table.remove('client-b'), true)
  t.equal(table.remove('client-b'), false)
  t.equal(table.remove('192.168.000.1'), false, 'another key than 192.168.0.1')
  t.equal(table.size, 1)
})
