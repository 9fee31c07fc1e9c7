// MemoryLimiter.trial/commit/drop, what a stack of policies decides with: a trial decides as
// consume does and stores nothing; commit stores that outcome, drop forgets it (a new identity's
// slot goes back). The standing numbers describe the state as it stands, unconsumed.
import t from 'tap'
import { MemoryLimiter, ADMITTED, LIMITED, SATURATED, type Verdict } from '../../../lib/backends/memory/memory-limiter.js'
import { kernelOf, type Algorithm, type Policy } from '../../../lib/core/rates/index.js'
import { capacityOf, normalizePolicy } from '../../../lib/rates/policy.js'

const ALGORITHMS: readonly Algorithm[] = ['token-bucket', 'fixed-window', 'sliding-window-counter', 'gcra']

const limiterFor = (policy: Policy, maxIdentities = 10): MemoryLimiter =>
  new MemoryLimiter(kernelOf(policy.algorithm), policy, maxIdentities)

/** 3 per second; burst 3 where there is one. */
const policyOf = (algorithm: Algorithm): Policy => normalizePolicy({ algorithm, limit: 3, windowMs: 1000 })

interface Fields { verdict: Verdict, retryAfterMs: number, remaining: number, resetAt: number }
const fields = (limiter: MemoryLimiter, verdict: Verdict): Fields =>
  ({ verdict, retryAfterMs: limiter.retryAfterMs, remaining: limiter.remaining, resetAt: limiter.resetAt })

// Costs and times that admit, refuse, roll windows over and refill, for every algorithm.
const HISTORY: Array<[now: number, cost: number]> = [
  [1250, 1], [1250, 2], [1250, 1], [1300, 3], [1600, 1], [2100, 2], [2100, 2], [2400, 1], [2999, 3], [3000, 1], [5000, 3], [5000, 1]
]

t.test('a trial decides as consume does, and stores nothing until commit', async (t) => {
  for (const algorithm of ALGORITHMS) {
    const policy = policyOf(algorithm)
    const tried = limiterFor(policy)
    const consumed = limiterFor(policy)
    const verdicts: Verdict[] = []
    for (const [now, cost] of HISTORY) {
      const before = tried.peek('u')
      const want = fields(consumed, consumed.consume('u', now, cost))
      const got = fields(tried, tried.trial('u', now, cost))
      t.strictSame(got, want, `${algorithm} at ${now}, cost ${cost}: the same decision`)
      t.equal(tried.trialVerdict, got.verdict)
      // (A new identity's slot is taken but not filled: nothing may read it before commit or drop.)
      if (before !== undefined) t.strictSame(tried.peek('u'), before, 'nothing stored by the trial')
      if (got.verdict === ADMITTED) {
        tried.commit()
        t.strictSame(tried.peek('u'), consumed.peek('u'), 'commit stores what consume stored')
      } else {
        tried.drop()
        t.strictSame(tried.peek('u'), before, 'a refusal dropped: the state as it was')
      }
      verdicts.push(got.verdict)
    }
    t.ok(verdicts.includes(ADMITTED) && verdicts.includes(LIMITED), `${algorithm}: admissions and refusals (${verdicts.join('')})`)
  }
})

t.test('standing numbers: the state as it stands — after a trial with room, remaining + cost; after a refusal, the trial\'s', async (t) => {
  for (const algorithm of ALGORITHMS) {
    const policy = policyOf(algorithm)
    const limiter = limiterFor(policy)
    const kernel = kernelOf(algorithm)
    for (const [now, cost] of HISTORY) {
      // The state as it stands, read with a cost of nothing.
      const stored = limiter.peek('u')
      const verdict = limiter.trial('u', now, cost)
      const asItStands = kernel.consume(stored ?? kernel.fresh(policy, now), policy, now, 0)
      const at = `${algorithm} at ${now}, cost ${cost}`
      t.equal(limiter.standingRemaining, asItStands.remaining, `${at}: standing remaining`)
      t.equal(limiter.standingResetAt, asItStands.resetAt, `${at}: standing resetAt`)
      if (verdict === ADMITTED) {
        t.equal(limiter.standingRemaining, limiter.remaining + cost, `${at}: remaining + cost`)
        limiter.commit()
      } else {
        t.strictSame([limiter.standingRemaining, limiter.standingResetAt], [limiter.remaining, limiter.resetAt], `${at}: a refusal's own numbers`)
        limiter.drop()
      }
    }
  }
})

t.test('standing resetAt is never before now: a new identity, and one that has recovered, are full already', async (t) => {
  // Guards a bug: the standing resetAt was the state's recovery tick unclamped — the window's start
  // for a new identity of a window algorithm, a tick long past for one idle since.
  for (const algorithm of ALGORITHMS) {
    const limiter = limiterFor(policyOf(algorithm))
    t.equal(limiter.trial('u', 1250, 1), ADMITTED)
    t.equal(limiter.standingRemaining, 3, `${algorithm}: a new identity stands at full capacity`)
    t.equal(limiter.standingResetAt, 1250, `${algorithm}: full now`)
    limiter.commit()
    t.equal(limiter.trial('u', 90_000, 1), ADMITTED)
    t.equal(limiter.standingRemaining, 3)
    t.equal(limiter.standingResetAt, 90_000, `${algorithm}: recovered long ago, full now`)
    limiter.drop()
  }
})

t.test('drop gives a new identity\'s slot back; a known identity keeps its state', async (t) => {
  const limiter = limiterFor(policyOf('fixed-window'), 2)
  t.equal(limiter.trial('10.0.0.1', 0, 1), ADMITTED)
  t.equal(limiter.table.size, 1, 'the slot is taken during the trial, so that a commit cannot fail')
  t.not(limiter.table.find('10.0.0.1'), -1)
  limiter.drop()
  t.equal(limiter.table.size, 0, 'and given back')
  t.equal(limiter.table.find('10.0.0.1'), -1)
  t.equal(limiter.peek('10.0.0.1'), undefined)

  t.equal(limiter.trial('fresh', 0, 5), LIMITED, 'a cost above the capacity refuses even a new identity')
  limiter.drop()
  t.equal(limiter.table.size, 0, 'its slot goes back too')

  t.equal(limiter.trial('known', 0, 2), ADMITTED)
  limiter.commit()
  const state = limiter.peek('known')
  t.strictSame(state, { start: 0, count: 2 })
  t.equal(limiter.trial('known', 10, 1), ADMITTED)
  limiter.drop()
  t.strictSame(limiter.peek('known'), state, 'dropped: as it was')
  t.equal(limiter.table.size, 1)

  limiter.drop()
  limiter.commit()
  t.strictSame(limiter.peek('known'), state, 'a second drop or a commit after a drop does nothing')
  t.equal(limiter.trial('known', 10, 1), ADMITTED)
  limiter.commit()
  limiter.commit()
  t.strictSame(limiter.peek('known'), { start: 0, count: 3 }, 'a second commit does nothing')
})

t.test('a trial on a full table: SATURATED with the table\'s wait; commit and drop do nothing', async (t) => {
  const policy = normalizePolicy({ algorithm: 'token-bucket', limit: 10, windowMs: 1000, burst: 5 })
  const limiter = limiterFor(policy, 1)
  t.equal(limiter.consume('a', 0, 3), ADMITTED) // full again at 300
  t.equal(limiter.trial('b', 100, 1), SATURATED)
  t.equal(limiter.trialVerdict, SATURATED)
  t.equal(limiter.retryAfterMs, 200, 'until a recovers')
  t.equal(limiter.retryAfterMs, limiter.table.waitMs)
  t.equal(limiter.remaining, 0)
  t.equal(limiter.resetAt, 300)
  t.equal(limiter.standingRemaining, capacityOf(policy), 'b has no state: as it stands, a new identity at full capacity')
  t.equal(limiter.standingResetAt, 100)
  limiter.commit()
  t.equal(limiter.table.find('b'), -1, 'commit stores nothing')
  limiter.drop()
  t.equal(limiter.table.size, 1)
  t.strictSame(limiter.peek('a'), { tokens: 2000, last: 0 }, "a's state untouched")
  t.equal(limiter.trial('b', 300, 5), ADMITTED, 'a recovered: its slot is b\'s')
  limiter.commit()
  t.equal(limiter.peek('a'), undefined)
  t.strictSame(limiter.peek('b'), { tokens: 0, last: 300 })
})
