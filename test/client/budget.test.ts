import t from 'tap'
import fc from 'fast-check'
import { advance, allowance, newBudget, recordRequest, withdrawRetry, SLICES, type BudgetConfig, type BudgetState } from '../../lib/client/budget.js'
import { fullJitter } from '../../lib/client/backoff.js'

const TENTH: BudgetConfig = { perMille: 100, minPerSecond: 1, windowMs: 10_000 }

function requests (state: BudgetState, n: number, now: number, config = TENTH): BudgetState {
  for (let i = 0; i < n; i++) state = recordRequest(state, config, now)
  return state
}

function retriesAllowed (state: BudgetState, now: number, config = TENTH): { count: number, state: BudgetState } {
  let count = 0
  for (;;) {
    const w = withdrawRetry(state, config, now)
    state = w.state
    if (!w.ok) return { count, state }
    count++
  }
}

t.test('the floor: minPerSecond over the window, with no requests yet', async (t) => {
  t.equal(retriesAllowed(newBudget(), 1_000_000).count, 10, '1 a second over 10 s')
  t.equal(retriesAllowed(newBudget(), 1_000_000, { ...TENTH, minPerSecond: 0 }).count, 0)
})

t.test('the ratio: a tenth of the requests in the window, when that is more than the floor', async (t) => {
  const now = 5_000_000
  t.equal(retriesAllowed(requests(newBudget(), 1000, now), now).count, 100)
  t.equal(retriesAllowed(requests(newBudget(), 50, now), now).count, 10, 'below the floor: the floor')
  t.equal(allowance(requests(newBudget(), 1000, now), TENTH), 100_000, 'in thousandths of a retry')
})

t.test('the window slides: requests and retries older than windowMs no longer count', async (t) => {
  let state = requests(newBudget(), 1000, 0)
  const spent = retriesAllowed(state, 0)
  t.equal(spent.count, 100)
  state = spent.state
  t.equal(retriesAllowed(state, 9_999).count, 0, 'still in the window: spent')
  t.equal(retriesAllowed(state, 10_000).count, 10, 'the window has moved past them: the floor again')
  t.equal(advance(state, TENTH, 5_000).requests.reduce((a, b) => a + b), 1000, 'half way: kept')
  t.equal(advance(state, TENTH, -5_000), state, 'a clock that steps back changes nothing')
  t.equal(recordRequest(state, TENTH, -5_000).requests[SLICES - 1], 1001, 'and counts into the newest slice')
})

t.test('property: over any run of requests and retries, the retries in a window stay within max(floor, ratio × requests)', async (t) => {
  fc.assert(fc.property(fc.array(fc.record({ dt: fc.integer({ min: 0, max: 3000 }), retry: fc.boolean() }), { maxLength: 300 }), (steps) => {
    let state = newBudget()
    let now = 0
    const log: Array<{ at: number, retry: boolean }> = []
    for (const step of steps) {
      now += step.dt
      if (step.retry) {
        const w = withdrawRetry(state, TENTH, now)
        state = w.state
        if (w.ok) log.push({ at: now, retry: true })
      } else {
        state = recordRequest(state, TENTH, now)
        log.push({ at: now, retry: false })
      }
      // The window counted by slices covers at least the last windowMs − a slice.
      const recent = log.filter((e) => e.at > now - (TENTH.windowMs - TENTH.windowMs / SLICES))
      const retries = recent.filter((e) => e.retry).length
      const firsts = log.filter((e) => !e.retry && e.at > now - TENTH.windowMs - TENTH.windowMs / SLICES).length
      if (retries * 1000 > Math.max(TENTH.minPerSecond * TENTH.windowMs, firsts * TENTH.perMille)) return false
    }
    return true
  }))
  t.pass('held')
})

t.test('full jitter: uniform in [0, min(cap, base × 2^(retry − 1))], whole ms', async (t) => {
  t.equal(fullJitter(1, 100, 10_000, 0), 0)
  t.equal(fullJitter(1, 100, 10_000, 0.999999), 100)
  t.equal(fullJitter(3, 100, 10_000, 0.5), 200, 'retry 3: up to 400')
  t.equal(fullJitter(30, 100, 10_000, 0.999999), 10_000, 'capped')
  t.equal(fullJitter(1000, 100, 10_000, 0.5), 5000, 'a huge retry number stays finite')
  t.equal(fullJitter(1, 100, 10_000, 1), 100, 'a draw of 1 is clamped')
  t.equal(fullJitter(1, 100, 10_000, -1), 0)
  t.equal(fullJitter(1, 100, 10_000, Number.NaN), 0)
  t.equal(fullJitter(0, 100, 10_000, 0.999999), 100, 'retry 0 reads as the first')
})
