import t from 'tap'
import fc from 'fast-check'
import { checkCharges } from './fixtures/harness.js'
import { kernelFor, kernelOf, MAX_STRIKES, withPenalty, type Outcome, type PenalizedState, type Policy } from '../../../lib/core/rates/index.js'
import { capacityOf, normalizePolicy } from '../../../lib/rates/policy.js'

/** Decides a run of (time, cost) on one identity, from a fresh state; the outcomes in order. */
function run (policy: Policy, ops: ReadonlyArray<readonly [number, number]>): Array<Outcome<PenalizedState>> {
  const kernel = kernelFor(policy)
  let state = kernel.fresh(policy, ops[0]![0]) as PenalizedState
  return ops.map(([now, cost]) => {
    const outcome = kernel.consume(state, policy, now, cost) as Outcome<PenalizedState>
    state = outcome.state
    return outcome
  })
}

const view = (o: Outcome<PenalizedState>): [boolean, number, number, number] => [o.allowed, o.remaining, o.retryAfterMs, o.state.strikes]

t.test("'restart' (continueExceeding): every refused request blocks one window from it; the block waited out is forgotten", async (t) => {
  const policy = normalizePolicy({ algorithm: 'fixed-window', limit: 2, windowMs: 1000, penalty: 'restart' })
  const outcomes = run(policy, [[0, 1], [1, 1], [10, 1], [500, 1], [1499, 1], [2498, 1], [2499, 1], [2500, 1]])
  t.same(outcomes.map(view), [
    [true, 1, 0, 0],
    [true, 0, 0, 0],
    [false, 0, 1000, 1], // the window ends at 1000, the block at 1010
    [false, 0, 1000, 2], // asked during the block: blocked to 1500
    [false, 0, 1000, 3], // to 2499, although the quota's new window has room
    [false, 0, 1000, 4], // to 3498
    [false, 0, 1000, 5],
    [false, 0, 1000, 6]
  ])
  t.same(outcomes.map((o) => o.state.blockedUntil), [0, 0, 1010, 1500, 2499, 3498, 3499, 3500])
  t.equal(outcomes[2]!.resetAt, 1010, 'resetAt: the block\'s end, after the window\'s')
  // Waited out: at the block's end the quota decides again, from its own state.
  const waited = run(policy, [[0, 1], [1, 1], [10, 1], [1010, 1], [1011, 1], [1012, 1]])
  t.same(waited.map(view).slice(3), [[true, 1, 0, 0], [true, 0, 0, 0], [false, 0, 1000, 1]], 'admitted at Retry-After; the next refusal starts a block of one window again')
})

t.test("'double' (exponentialBackoff): the k-th refusal in a row blocks windowMs * 2^(k-1) from it, at most maxMs", async (t) => {
  const policy = normalizePolicy({ algorithm: 'token-bucket', limit: 1, windowMs: 1000, penalty: { mode: 'double', maxMs: 4000 } })
  const outcomes = run(policy, [[0, 1], [1, 1], [2, 1], [3, 1], [4, 1], [4004, 1]])
  t.same(outcomes.map((o) => [o.allowed, o.retryAfterMs, o.state.blockedUntil, o.state.strikes]), [
    [true, 0, 0, 0],
    [false, 1000, 1001, 1], // the bucket's own wait is 999: the block's window is longer
    [false, 2000, 2002, 2],
    [false, 4000, 4003, 3],
    [false, 4000, 4004, 4], // 8000 capped at 4000
    [true, 0, 0, 0] // waited out
  ])
  t.equal(normalizePolicy({ algorithm: 'fixed-window', limit: 1, windowMs: 1000, penalty: 'double' }).penalty?.mode, 'double')
  t.same(normalizePolicy({ algorithm: 'fixed-window', limit: 1, windowMs: 1000, penalty: 'double' }).penalty, { mode: 'double', maxMs: 64_000 }, 'at most 64 windows by default')
})

t.test('a request the quota would admit during the block consumes nothing; a larger cost waits for the quota too', async (t) => {
  const policy = normalizePolicy({ algorithm: 'fixed-window', limit: 3, windowMs: 1000, penalty: 'restart' })
  const outcomes = run(policy, [[0, 3], [10, 1], [1005, 1], [3000, 1]])
  t.same(view(outcomes[2]!), [false, 0, 1000, 2], 'blocked at 1005 although the new window has room')
  t.same([outcomes[3]!.allowed, outcomes[3]!.remaining], [true, 2], 'after the block: the window untouched by the refused looks')
  // A cost the quota needs longer for than the block: the wait is the quota's.
  const slow = normalizePolicy({ algorithm: 'token-bucket', limit: 1, windowMs: 1000, burst: 3, penalty: 'restart' })
  const [, refused, big] = run(slow, [[0, 3], [1, 1], [2, 3]])
  t.equal(refused!.retryAfterMs, 1000)
  t.equal(big!.retryAfterMs, 2998, 'three tokens take until 3000: later than the block (1002 + 1000)')
})

t.test('strikes stop at MAX_STRIKES; the state writes and reads back as a row of numbers', async (t) => {
  const policy = normalizePolicy({ algorithm: 'gcra', limit: 1, windowMs: 10, penalty: { mode: 'double', maxMs: 1_000_000 } })
  const ops: Array<[number, number]> = [[0, 1]]
  for (let i = 1; i <= MAX_STRIKES + 5; i++) ops.push([i, 1])
  const outcomes = run(policy, ops)
  t.equal(outcomes.at(-1)!.state.strikes, MAX_STRIKES)
  t.equal(outcomes.at(-1)!.retryAfterMs, 1_000_000, 'the bound')
  const kernel = kernelFor(policy)
  t.equal(kernel.fields, kernelOf('gcra').fields + 2)
  const row = new Float64Array(kernel.fields)
  const last = outcomes.at(-1)!.state
  kernel.write(last, row, 0)
  t.same(kernel.read(row, 0), last)
  t.equal(kernel.recoversAt(last, policy), last.blockedUntil, 'recovered when the block ends (the quota sooner)')
  t.same(kernel.fresh(policy, 5), { inner: kernelOf('gcra').fresh(policy, 5), blockedUntil: 0, strikes: 0 })
  t.equal(kernelFor(normalizePolicy({ algorithm: 'gcra', limit: 1, windowMs: 10 })), kernelOf('gcra'), 'without a penalty: the algorithm\'s own kernel')
})

t.test('property: a refusal\'s wait is honest (the same cost passes then, when nothing else consumed), never shorter than the quota\'s, and bounded', async (t) => {
  const policyArb = fc.record({
    algorithm: fc.constantFrom('token-bucket', 'fixed-window', 'sliding-window-counter', 'gcra' as const),
    limit: fc.integer({ min: 1, max: 20 }),
    windowMs: fc.integer({ min: 1, max: 5000 }),
    penalty: fc.oneof(fc.constant('restart' as const), fc.constant('double' as const), fc.integer({ min: 1, max: 40 }).map((k) => ({ mode: 'double' as const, maxRatio: k })))
  }).map(({ algorithm, limit, windowMs, penalty }) => normalizePolicy({
    algorithm,
    limit,
    windowMs,
    penalty: typeof penalty === 'string' ? penalty : { mode: 'double', maxMs: windowMs * penalty.maxRatio }
  }))
  fc.assert(fc.property(policyArb, fc.array(fc.tuple(fc.integer({ min: 0, max: 3000 }), fc.integer({ min: 1, max: 20 })), { minLength: 1, maxLength: 40 }), fc.nat({ max: 1e12 }), (policy, steps, t0) => {
    const kernel = kernelFor(policy)
    const plain = kernelOf(policy.algorithm)
    const longest = policy.penalty!.mode === 'restart' ? policy.windowMs : policy.penalty!.maxMs
    let now = t0
    let state = kernel.fresh(policy, now) as PenalizedState
    for (const [dt, rawCost] of steps) {
      now += dt
      const cost = Math.min(rawCost, policy.limit)
      const outcome = kernel.consume(state, policy, now, cost) as Outcome<PenalizedState>
      if (!outcome.allowed) {
        const own = plain.consume(state.inner, policy, now, cost)
        if (outcome.retryAfterMs < (own.allowed ? 1 : own.retryAfterMs)) return false
        if (outcome.retryAfterMs > longest + 2 * policy.windowMs || outcome.remaining !== 0) return false
        // Come back at the wait with the same cost: admitted.
        if (!kernel.consume(outcome.state, policy, now + outcome.retryAfterMs, cost).allowed) return false
        if (outcome.resetAt < now + outcome.retryAfterMs) return false
        // t: more comes no later than the wait (Retry-After >= t), and not before the block ends.
        if (outcome.moreAt > now + outcome.retryAfterMs || outcome.moreAt < Math.max(now + 1, state.blockedUntil)) return false
      }
      // t is never early: one more unit than remaining does not pass a tick before moreAt, and does at it.
      if (outcome.remaining < capacityOf(policy)) {
        if (kernel.consume(outcome.state, policy, outcome.moreAt - 1, outcome.remaining + 1).allowed) return false
        if (!kernel.consume(outcome.state, policy, outcome.moreAt, outcome.remaining + 1).allowed) return false
      } else if (outcome.moreAt !== now) return false
      state = outcome.state
    }
    return true
  }), { numRuns: 2000 })
  t.pass('2000 runs')
})

t.test('charges through a penalty: the block stays as it is, every property holds', async (t) => {
  const sizes = { maxLimit: 12, maxWindow: 30, maxBurst: 10, maxOps: 20 }
  let charges = 0
  for (const algorithm of ['token-bucket', 'fixed-window', 'sliding-window-counter', 'gcra'] as const) {
    for (const penalty of [{ mode: 'restart' as const }, { mode: 'double' as const, maxMs: 200 }]) {
      charges += checkCharges(withPenalty(kernelOf(algorithm), penalty), algorithm, [algorithm === 'token-bucket' || algorithm === 'gcra' ? sizes : { ...sizes, maxBurst: undefined }]).charges
    }
  }
  t.ok(charges > 1000, `${charges} charges`)
  // A charge during a block: refused until the block ends (or the quota has a unit), strikes kept.
  const policy = normalizePolicy({ algorithm: 'fixed-window', limit: 2, windowMs: 1000, penalty: 'restart' })
  const kernel = kernelFor(policy)
  const refused = kernel.consume(kernel.consume(kernel.consume(kernel.fresh(policy, 0), policy, 0, 2).state, policy, 1, 1).state, policy, 2, 1) as Outcome<PenalizedState>
  const charged = kernel.charge(refused.state, policy, 3, -2) as Outcome<PenalizedState>
  t.same(view(charged), [false, 0, refused.state.blockedUntil - 3, refused.state.strikes])
  t.ok(kernel.consume(charged.state, policy, refused.state.blockedUntil, 2).allowed, 'the units returned are there when the block ends')
})
