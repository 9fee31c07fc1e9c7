// The recovery benchmark's per-second numbers (bench/overload/seconds.ts): pure functions over the
// generator's per-attempt arrays, checked on hand-made attempts (no sockets, no timing).
import t from 'tap'
import { ERROR, perSecond, recoveredAfter, TIMEOUT } from '../../bench/overload/seconds.js'

t.test('perSecond bins attempts by due time: goodput, the retries\' share, first attempts\' share of the 200s, p99 of the 200s, 503s and timeouts', async (t) => {
  // Second 0: a first attempt served in 10 ms, one shed, its retry served in 30 ms.
  // Second 1: a first attempt that timed out, its retry broken. Before and after the window: left out.
  const attempts = {
    count: 7,
    due: [1000, 1100, 1101, 2000, 3000, 999, 4000],
    ended: [1010, 1101, 1131, 3000, 3001, 1000, 4001],
    status: [200, 503, 200, TIMEOUT, ERROR, 200, 200],
    attempt: [1, 1, 2, 1, 2, 1, 1]
  }
  const [s0, s1, s2] = perSecond(attempts, 1000, 3)
  t.same(s0, { sent: 3, retryShare: 1 / 3, goodput: 2, firstOk: 1 / 2, okP99: 30, shed: 1 / 3, timeouts: 0 })
  t.same(s1, { sent: 1, retryShare: 0, goodput: 0, firstOk: Number.NaN, okP99: Number.NaN, shed: 0, timeouts: 1 })
  t.same(s2, { sent: 1, retryShare: 1, goodput: 0, firstOk: Number.NaN, okP99: Number.NaN, shed: 0, timeouts: 1 })
})

t.test('perSecond gives NaN shares for a second with nothing sent', async (t) => {
  const [s] = perSecond({ count: 0, due: [], ended: [], status: [], attempt: [] }, 0, 1)
  t.equal(s!.sent, 0)
  t.ok(Number.isNaN(s!.retryShare) && Number.isNaN(s!.shed) && Number.isNaN(s!.okP99))
})

t.test('recoveredAfter: seconds from `from` until goodput reaches the threshold for good', async (t) => {
  t.equal(recoveredAfter([0.8, 0.1, 0.9, 0.9], 1, 0.72), 1, 'one second below, then above to the end')
  t.equal(recoveredAfter([0.8, 0.8, 0.8], 1, 0.72), 0, 'never below')
  t.ok(Number.isNaN(recoveredAfter([0.8, 0.8, 0.1, 0.8, 0.1], 1, 0.72)), 'still below in the last second: NaN')
  t.equal(recoveredAfter([0.1, 0.9, 0.1, 0.9], 0, 0.72), 3, 'a dip after the first return counts')
  t.equal(recoveredAfter([0.9, Number.NaN, 0.9], 0, 0.72), 2, 'a second with no answer is below')
})
