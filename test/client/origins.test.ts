import t from 'tap'
import { recordRequest, type BudgetConfig } from '../../lib/client/budget.js'
import { MAX_ORIGINS, Origins } from '../../lib/client/state.js'

// What the client remembers of the origins it talks to, with the clock passed in: bounded, and
// what it forgets is what holds nothing.
const BUDGET: BudgetConfig = { perMille: 100, minPerSecond: 1, windowMs: 10_000 }

t.test(`at ${MAX_ORIGINS} origins, a new one makes the client forget those that hold nothing`, async (t) => {
  const clock = { now: 100_000 }
  const origins = new Origins(BUDGET, () => clock.now)
  const paused = origins.get('http://paused')
  paused.holdUntil = clock.now + 1000
  const busy = origins.get('http://busy')
  busy.budget = recordRequest(busy.budget, BUDGET, clock.now)
  for (let i = 2; i < MAX_ORIGINS; i++) origins.get(`http://idle-${i}`)
  t.equal(origins.size, MAX_ORIGINS)
  t.equal(origins.get('http://paused'), paused, 'a known origin is the same state')
  origins.get('http://new')
  t.equal(origins.size, 3, 'the idle ones forgotten; the paused one, the one with requests in its window and the new one kept')
  t.equal(origins.get('http://paused').holdUntil, clock.now + 1000, 'the pause is still known')
  t.equal(origins.get('http://busy'), busy)
  // Its window over, the busy origin holds nothing any more.
  clock.now += BUDGET.windowMs + 1000
  for (let i = 3; i < MAX_ORIGINS; i++) origins.get(`http://idle-${i}`)
  origins.get('http://another')
  t.equal(origins.size, 1, 'every origin that held nothing forgotten')
})

t.test('when every origin holds something, the one known longest goes', async (t) => {
  const clock = { now: 0 }
  const origins = new Origins(BUDGET, () => clock.now)
  for (let i = 0; i < MAX_ORIGINS; i++) origins.get(`http://o-${i}`).holdUntil = 5000
  const first = origins.get('http://o-0')
  origins.get('http://new')
  t.equal(origins.size, MAX_ORIGINS)
  t.not(origins.get('http://o-1').holdUntil, 0, 'the second is still known')
  t.not(origins.get('http://o-0'), first, 'the first was forgotten: it starts afresh')
})
