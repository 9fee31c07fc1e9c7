import t from 'tap'
import fc from 'fast-check'
import { adaptiveLimitOptions, adaptiveSample, adaptiveTick, adaptiveTickAt, MIN_RTT_MS, newAdaptiveLimit } from '../../../lib/core/index.js'
import type { AdaptiveLimit, AdaptiveLimitOptions } from '../../../lib/core/index.js'
import { gradient2Creep, simulate } from './fixtures/downstream.js'
import type { Phase, Step } from './fixtures/downstream.js'

const o = adaptiveLimitOptions()

// A state after `rtts` at a constant in-flight count, one sample per ms.
function feed (state: AdaptiveLimit, rtts: readonly number[], inflight: number, options = o, t0 = 0): AdaptiveLimit {
  rtts.forEach((rtt, i) => { state = adaptiveSample(state, { rtt, inflight, now: t0 + i + 1 }, options) })
  return state
}

function limits (steps: readonly Step[]): number[] {
  return steps.map((s) => s.state.limit)
}

// The limits outside probes.
function settled (steps: readonly Step[]): number[] {
  return steps.filter((s) => !s.state.probing).map((s) => s.state.limit)
}

const most = (xs: readonly number[]): number => xs.reduce((a, b) => Math.max(a, b), -Infinity)
const least = (xs: readonly number[]): number => xs.reduce((a, b) => Math.min(a, b), Infinity)

t.test('options: the defaults, overrides on top, frozen', async (t) => {
  t.same(o, {
    initial: 20, min: 1, max: 1000, tolerance: 1.5, smoothing: 0.2, fastWeight: 0.1, queueSize: 0,
    utilization: 0.5, probeIntervalMs: 2_000, probeRatio: 0.5, probeSamples: 5, probeMaxMs: 1000, idleMs: 4_000
  })
  const mine = adaptiveLimitOptions({ max: 50, tolerance: 2 })
  t.equal(mine.max, 50)
  t.equal(mine.tolerance, 2)
  t.equal(mine.min, 1)
  t.ok(Object.isFrozen(o) && Object.isFrozen(mine))
  t.same(adaptiveLimitOptions({ max: undefined, min: 2 }), { ...o, min: 2 }, 'an undefined override keeps the default')
})

t.test('a fresh state: the initial limit clamped into [min, max], no RTT yet', async (t) => {
  t.same(newAdaptiveLimit(o, 7), {
    limit: 20, estimate: 20, baseline: 0, fast: 0, measured: 0, confirmedAt: 7, probing: false, probeStart: 7, probeCount: 0, probeSum: 0, usedAt: 7
  })
  t.equal(newAdaptiveLimit(adaptiveLimitOptions({ initial: 5000 }), 0).limit, 1000)
  t.equal(newAdaptiveLimit(adaptiveLimitOptions({ initial: 0, min: 3 }), 0).limit, 3)
  t.equal(newAdaptiveLimit(adaptiveLimitOptions({ initial: 12.7 }), 0).limit, 12)
})

t.test('table: one sample at a time', async (t) => {
  const s0 = newAdaptiveLimit(o, 0)
  // The first sample only sets the RTTs (and, at 20 in flight, says the limit is in use).
  const s1 = adaptiveSample(s0, { rtt: 10, inflight: 20, now: 1 }, o)
  t.same(s1, { ...s0, baseline: 10, fast: 10, measured: 10, confirmedAt: 1, usedAt: 1 })
  t.equal(adaptiveSample(s0, { rtt: 10, inflight: 9, now: 1 }, o).usedAt, 0, 'below half the limit: not in use')
  // No queueing, limit in use: grows by smoothing * ceil(sqrt(20)) = 0.2 * 5.
  const s2 = adaptiveSample(s1, { rtt: 10, inflight: 20, now: 2 }, o)
  t.equal(s2.estimate, 21)
  t.equal(s2.limit, 21)
  t.equal(s2.confirmedAt, 2, 'a fast RTT equal to the baseline confirms it')
  // App-limited (9 < 0.5 * 21): no growth.
  t.equal(adaptiveSample(s2, { rtt: 10, inflight: 10, now: 3 }, o).estimate, 21)
  t.equal(adaptiveSample(s2, { rtt: 10, inflight: 11, now: 3 }, o).estimate > 21, true)
  // Within the tolerance (fast 10.5 <= 1.5 * 10): still no queueing, still grows.
  t.equal(adaptiveSample(s2, { rtt: 15, inflight: 21, now: 3 }, o).estimate > 21, true)
  // A fixed queue size.
  t.equal(adaptiveSample(s1, { rtt: 10, inflight: 20, now: 2 }, adaptiveLimitOptions({ queueSize: 10 })).estimate, 22)
  // Queueing: fast 10 + 0.1 * (300 - 10) = 39, gradient clamped to 0.5:
  // 21 * 0.8 + (21 * 0.5 + 5) * 0.2 = 19.9. A decrease applies even when app-limited.
  for (const inflight of [21, 1]) {
    const s = adaptiveSample(s2, { rtt: 300, inflight, now: 3 }, o)
    t.equal(s.fast, 39)
    t.equal(s.baseline, 10, 'the baseline never rises from a sample')
    t.equal(s.confirmedAt, 2)
    t.equal(Math.round(s.estimate * 1e9) / 1e9, 19.9)
    t.equal(s.limit, 19)
  }
  // A faster RTT lowers the baseline at once and holds growth while it falls.
  const s3 = adaptiveSample(s2, { rtt: 5, inflight: 21, now: 3 }, o)
  t.equal(s3.baseline, 9.5)
  t.equal(s3.fast, 9.5)
  t.equal(s3.estimate, 21)
  t.equal(s3.confirmedAt, 3)
  // An RTT of 0 (a coarse clock) counts as MIN_RTT_MS.
  const z = adaptiveSample(s0, { rtt: 0, inflight: 1, now: 1 }, o)
  t.equal(z.baseline, MIN_RTT_MS)
  t.ok(Number.isFinite(adaptiveSample(z, { rtt: 0, inflight: 1, now: 2 }, o).estimate))
})

t.test('bounds: never above max nor below min', async (t) => {
  // A fixed queue size of 1: the gradient's floor (0.5) then leads to 2, below min. (With the sqrt
  // queue size the floor is where 0.5 * L + ceil(sqrt(L)) = L, about 4 to 6.)
  const small = adaptiveLimitOptions({ initial: 4, min: 3, max: 6, queueSize: 1 })
  const up = feed(newAdaptiveLimit(small, 0), Array(100).fill(10), 6, small)
  t.equal(up.limit, 6)
  t.equal(up.estimate, 6)
  const down = feed(up, Array(100).fill(1000), 6, small, 100)
  t.equal(down.limit, 3)
  t.equal(down.estimate, 3)
})

t.test('inputs are untouched, and equal inputs give equal outputs', async (t) => {
  const s = Object.freeze(feed(newAdaptiveLimit(o, 0), [10, 10, 12], 20))
  const sample = Object.freeze({ rtt: 30, inflight: 20, now: 4 })
  t.same(adaptiveSample(s, sample, o), adaptiveSample(s, sample, o))
})

t.test('steady downstream: the limit grows until in-flight no longer matters, then stays', async (t) => {
  const demand = 50
  const steps = simulate(newAdaptiveLimit(o, 0), o, [{ samples: 5000, baseMs: 10, capacity: Infinity, demand }])
  const ls = limits(steps)
  const reached = ls.findIndex((l) => l >= demand)
  t.ok(reached >= 0 && reached < 200, `the limit covers the demand after ${reached} samples`)
  t.ok(ls.slice(reached).every((l) => l >= demand), 'and never sheds after that')
  const final = ls.at(-1)!
  t.ok(final <= 2 * demand + Math.ceil(Math.sqrt(2 * demand)), `it stops growing once app-limited: ${final}`)
  t.ok(ls.slice(1000).every((l) => l === final), 'and stays')
  t.notOk(steps.some((s) => s.state.probing), 'no probe: nothing to re-measure')
})

t.test('steady downstream with noise within the tolerance: never probes, never sheds', async (t) => {
  const demand = 40
  fc.assert(fc.property(fc.array(fc.double({ min: 10, max: 14, noNaN: true }), { minLength: 300, maxLength: 1500 }), (rtts) => {
    let state = newAdaptiveLimit(o, 0)
    let now = 0
    let covered = false
    for (const rtt of rtts) {
      const inflight = Math.min(demand, state.limit)
      now += rtt / inflight + 1000 // sparse samples: probe intervals pass many times
      state = adaptiveSample(state, { rtt, inflight, now }, o)
      if (state.probing) return false
      if (covered && state.limit < demand) return false
      covered ||= state.limit >= demand
    }
    return covered
  }), { numRuns: 50 })
  t.pass('holds')
})

const capacity = 40
const loaded = (samples: number, baseMs: number): Phase => ({ samples, baseMs, capacity, demand: 1000 })
// The equilibrium under heavy demand: in-flight up to capacity * tolerance, plus the queue size.
const equilibrium = capacity * 1.5 + Math.ceil(Math.sqrt(capacity * 2))

t.test('modest sustained overload: no creep (Gradient2 creeps to max in the same system)', async (t) => {
  const phase = loaded(200_000, 10)
  const steps = simulate(newAdaptiveLimit(o, 0), o, [phase])
  const after = settled(steps.slice(1000))
  const highest = most(after)
  t.ok(highest <= equilibrium, `highest limit ${highest} <= ${equilibrium} over ${Math.round(steps.at(-1)!.now / 1000)} s`)
  t.ok(least(after) >= capacity, 'and the downstream stays busy: the limit is never below its capacity')
  const probes = steps.filter((s, i) => s.state.probing && !steps[i - 1]!.state.probing).length
  t.ok(probes >= 4, `${probes} probes, each measuring the same baseline`)
  t.ok(steps.slice(1000).every((s) => s.state.baseline === 10), 'the baseline stays at the no-load RTT')
  const g2 = gradient2Creep(phase, o)
  t.equal(g2.at(-1), o.max, 'Gradient2\'s limit: max')
})

t.test('a downstream 4x slower: the limit halves within 15 samples, at most one probe interval later it is back', async (t) => {
  const warm = simulate(newAdaptiveLimit(o, 0), o, [loaded(20_000, 10)])
  const before = warm.at(-1)!
  const slow = simulate(before.state, o, [loaded(20_000, 40)], before.now)
  const halved = limits(slow).findIndex((l) => l <= before.state.limit / 2)
  t.ok(halved >= 0 && halved < 15, `limit ${before.state.limit} halved after ${halved + 1} samples`)
  // Vegas would stay at the floor: the baseline (10 ms) makes every RTT look like queueing. The probe
  // measures 40 ms at half the limit, and the limit grows back to what the downstream takes.
  const back = slow.findIndex((s) => s.state.limit >= before.state.limit - 2 && s.state.baseline === 40)
  t.ok(back > 0, 'back to the level before')
  const ms = slow[back]!.now - before.now
  t.ok(ms <= o.probeIntervalMs + 1000, `after ${Math.round(ms)} ms (probe interval ${o.probeIntervalMs} ms)`)
  t.ok(most(limits(slow.slice(back))) <= 1.25 * equilibrium, 'it overshoots by at most a quarter (the fast RTT lags the queue)')
  t.ok(settled(slow.slice(back + 1000)).every((l) => l <= equilibrium && l >= capacity), 'then settles')
})

t.test('recovery after a short slowdown: the baseline never moved, the limit climbs back within 100 samples', async (t) => {
  // A slowdown shorter than the probe interval (10 s here, so that 500 slow samples fit in it).
  const o10 = adaptiveLimitOptions({ probeIntervalMs: 10_000 })
  const warm = simulate(newAdaptiveLimit(o10, 0), o10, [loaded(20_000, 10)])
  const before = warm.at(-1)!
  const slow = simulate(before.state, o10, [loaded(500, 40)], before.now)
  t.ok(slow.at(-1)!.state.limit < 10, 'the limit fell')
  t.equal(slow.at(-1)!.state.baseline, 10, 'no probe yet')
  const fast = simulate(slow.at(-1)!.state, o10, [loaded(5000, 10)], slow.at(-1)!.now)
  const back = limits(fast).findIndex((l) => l >= before.state.limit - 2)
  t.ok(back >= 0 && back < 100, `back to ${before.state.limit - 2} after ${back + 1} samples`)
  t.ok(most(limits(fast)) <= 1.25 * equilibrium, 'it overshoots by at most a quarter')
  t.ok(settled(fast.slice(back + 1000)).every((l) => l <= equilibrium && l >= capacity), 'then settles')
})

t.test('recovery after a long slowdown (the baseline rose): re-measured at once, no overshoot', async (t) => {
  const warm = simulate(newAdaptiveLimit(o, 0), o, [loaded(20_000, 10), loaded(40_000, 40)])
  const before = warm.at(-1)!
  t.equal(before.state.baseline, 40, 'the probe took the slower baseline')
  const fast = simulate(before.state, o, [loaded(20_000, 10)], before.now)
  const remeasured = fast.findIndex((s) => s.state.baseline < 11)
  t.ok(remeasured >= 0, 'the baseline is re-measured')
  const ms = fast[remeasured]!.now - before.now
  t.ok(ms < 100, `${Math.round(ms)} ms after the recovery, long before a probe interval`)
  t.ok(most(limits(fast)) <= 1.5 * equilibrium, 'the limit overshoots by at most a half meanwhile')
  // The re-measuring probe ran at a limit just above capacity (42 > 40): the baseline is 10.5, 5 % high.
  t.ok(settled(fast.slice(remeasured + 1000)).every((l) => l <= 1.05 * equilibrium && l >= capacity), 'then settles')
})

t.test('probe: the limit, which samples count, how it ends', async (t) => {
  const opts = adaptiveLimitOptions({ probeIntervalMs: 100, probeSamples: 3, probeMaxMs: 50 })
  // Baseline 10 at t = 1, then queueing from t = 101.
  const s1 = adaptiveSample(newAdaptiveLimit(opts, 0), { rtt: 10, inflight: 20, now: 1 }, opts)
  const queued = adaptiveSample(s1, { rtt: 20, inflight: 20, now: 50 }, opts)
  t.notOk(queued.probing, 'within the tolerance: no probe')
  const early = adaptiveSample(s1, { rtt: 300, inflight: 20, now: 100 }, opts)
  t.notOk(early.probing, 'queueing, but the baseline is younger than probeIntervalMs')
  const p = adaptiveSample(s1, { rtt: 300, inflight: 20, now: 101 }, opts)
  t.ok(p.probing)
  t.equal(p.limit, 10, 'probeRatio of the limit')
  t.equal(p.estimate, 20, 'the estimate is kept')
  t.equal(p.probeStart, 101)
  // Started before the probe, or above the probe's limit: not counted.
  const a = adaptiveSample(p, { rtt: 10, inflight: 5, now: 105 }, opts)
  const b = adaptiveSample(a, { rtt: 3, inflight: 11, now: 105 }, opts)
  t.equal(b.probeCount, 0)
  t.equal(b.limit, 10)
  const c = adaptiveSample(b, { rtt: 11, inflight: 10, now: 112 }, opts)
  const d = adaptiveSample(c, { rtt: 12, inflight: 1, now: 113 }, opts)
  t.same([d.probeCount, d.probeSum, d.probing], [2, 23, true])
  const e = adaptiveSample(d, { rtt: 13, inflight: 2, now: 120 }, opts)
  t.same([e.probing, e.baseline, e.fast, e.measured, e.limit, e.estimate, e.confirmedAt], [false, 12, p.fast, 12, 20, 20, 120],
    'the mean RTT is the baseline; the fast RTT (the RTT at the restored limit) is kept')
  const slower = adaptiveSample(adaptiveSample(adaptiveSample(p, { rtt: 50, inflight: 1, now: 160 }, opts), { rtt: 60, inflight: 1, now: 170 }, opts), { rtt: 70, inflight: 1, now: 180 }, opts)
  t.same([slower.probing, slower.baseline, slower.fast], [false, 60, 60], 'unless the probe measured more')
  // Overdue with no clean sample: the baseline is kept, the next probe waits a whole interval.
  // It lasts three fast RTTs (39 ms) when that is longer than probeMaxMs (50 ms): 117 ms.
  t.ok(adaptiveSample(p, { rtt: 120, inflight: 10, now: 217.9 }, opts).probing)
  const f = adaptiveSample(p, { rtt: 120, inflight: 10, now: 218 }, opts)
  t.same([f.probing, f.baseline, f.fast, f.measured, f.limit, f.confirmedAt], [false, 10, p.fast, 10, 20, 218])
  const quick = adaptiveLimitOptions({ probeIntervalMs: 100, probeMaxMs: 500 })
  t.notOk(adaptiveSample(p, { rtt: 100, inflight: 10, now: 601 }, quick).probing, 'probeMaxMs when longer')
  t.ok(adaptiveSample(p, { rtt: 100, inflight: 10, now: 600 }, quick).probing)
  // The probe's limit is never below min.
  const floor = adaptiveLimitOptions({ probeIntervalMs: 100, min: 15, initial: 20 })
  t.equal(adaptiveSample(adaptiveSample(newAdaptiveLimit(floor, 0), { rtt: 10, inflight: 20, now: 1 }, floor), { rtt: 300, inflight: 20, now: 101 }, floor).limit, 15)
})

t.test('tick: ends an overdue probe with no traffic, leaves everything else alone until idle', async (t) => {
  const opts = adaptiveLimitOptions({ probeIntervalMs: 100, probeMaxMs: 50 })
  const s1 = adaptiveSample(newAdaptiveLimit(opts, 0), { rtt: 10, inflight: 20, now: 1 }, opts)
  t.equal(adaptiveTick(s1, 1 + opts.idleMs - 1, opts, 0), s1, 'not probing, not idle: the same state')
  t.equal(adaptiveTickAt(s1, opts), 1 + opts.idleMs, 'the next change: idleMs after the last use')
  t.equal(adaptiveTickAt(newAdaptiveLimit(opts, 0), opts), Infinity, 'a fresh state: none')
  const p = adaptiveSample(s1, { rtt: 300, inflight: 20, now: 101 }, opts)
  t.equal(adaptiveTickAt(p, opts), 101 + 3 * p.fast, "a probe's end: three fast RTTs here, longer than probeMaxMs")
  t.equal(adaptiveTick(p, 150, opts, 0), p, 'not overdue yet')
  const done = adaptiveTick(p, 218, opts, 0)
  t.same([done.probing, done.limit, done.baseline, done.confirmedAt, done.usedAt], [false, 20, 10, 218, 101], "a probe is ended; its end is no use (last used at its start's sample)")
  t.equal(adaptiveTickAt(done, opts), 101 + opts.idleMs, 'the next change: idleMs after that use')
  t.equal(adaptiveTick(done, 101 + opts.idleMs, opts, 0).baseline, 0, 'idleMs after it: afresh')
  t.same(adaptiveTick(p, 1e9, opts, 0), newAdaptiveLimit(opts, 1e9), 'a probe overdue long after the last use: ended, then afresh at once')
  t.equal(adaptiveTick(p, 1e9, opts, 10).baseline, 10, 'with the limit in use at that tick: ended, and kept')
  // Samples during a probe at half its limit are use: a busy server's long probe is no idleness.
  const slow = adaptiveLimitOptions({ probeIntervalMs: 100, probeMaxMs: 50, idleMs: 100 })
  const q = adaptiveSample(adaptiveSample(newAdaptiveLimit(slow, 0), { rtt: 10, inflight: 20, now: 1 }, slow), { rtt: 300, inflight: 20, now: 101 }, slow)
  const busyProbe = adaptiveSample(q, { rtt: 40, inflight: q.limit, now: 150 }, slow)
  t.same([busyProbe.probing, busyProbe.usedAt], [true, 150], 'a sample in use during the probe')
  t.equal(adaptiveTick(busyProbe, 101 + 3 * busyProbe.fast, slow, 0).baseline, 40, 'its end, within idleMs of that use: what it measured is kept')
})

// Valid options: the documented ranges.
const optionsArb = fc.record({
  initial: fc.double({ min: 0, max: 3000, noNaN: true }),
  min: fc.integer({ min: 1, max: 50 }),
  span: fc.integer({ min: 0, max: 500 }),
  tolerance: fc.double({ min: 1, max: 4, noNaN: true }),
  smoothing: fc.double({ min: 0.01, max: 1, noNaN: true }),
  fastWeight: fc.double({ min: 0.01, max: 1, noNaN: true }),
  queueSize: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 50, noNaN: true })),
  utilization: fc.double({ min: 0, max: 1, noNaN: true }),
  probeIntervalMs: fc.double({ min: 0.001, max: 1000, noNaN: true }),
  probeRatio: fc.double({ min: 0.01, max: 0.99, noNaN: true }),
  probeSamples: fc.integer({ min: 1, max: 10 }),
  probeMaxMs: fc.double({ min: 0.001, max: 1000, noNaN: true }),
  idleMs: fc.double({ min: 0.001, max: 5000, noNaN: true })
}).map(({ span, ...rest }): AdaptiveLimitOptions => adaptiveLimitOptions({ ...rest, max: rest.min + span }))

const eventArb = fc.oneof(
  fc.record({ rtt: fc.double({ min: 0, max: 10_000, noNaN: true }), inflight: fc.integer({ min: 0, max: 3000 }), dt: fc.double({ min: -5, max: 2000, noNaN: true }) }),
  fc.record({ tick: fc.constant(true), dt: fc.double({ min: 0, max: 5000, noNaN: true }), inflight: fc.integer({ min: 0, max: 3000 }) })
)

t.test('property: the limit is always an integer in [min, max], the estimate in [min, max]', async (t) => {
  fc.assert(fc.property(optionsArb, fc.array(eventArb, { maxLength: 300 }), (opts, events) => {
    let state = newAdaptiveLimit(opts, 0)
    let now = 0
    const ok = (s: AdaptiveLimit): boolean => Number.isInteger(s.limit) && s.limit >= opts.min && s.limit <= opts.max &&
      s.estimate >= opts.min && s.estimate <= opts.max && s.limit <= Math.floor(s.estimate)
    if (!ok(state)) return false
    for (const e of events) {
      now += e.dt
      state = 'tick' in e ? adaptiveTick(state, now, opts, e.inflight) : adaptiveSample(state, { rtt: e.rtt, inflight: e.inflight, now }, opts)
      if (!ok(state)) return false
    }
    return true
  }), { numRuns: 300 })
  t.pass('holds')
})

// Cheap answers (0.1 ms), each done before most others arrive (2 in flight, far below half the
// limit), and one window in ten a busy turn of the loop (1 ms): a flood whose latency is mostly
// noise, one sample per 5 ms window, for `ms`.
function flood (state: AdaptiveLimit, t0: number, ms: number, options = o): { state: AdaptiveLimit, now: number } {
  let now = t0
  for (let i = 0; now < t0 + ms; i++) {
    now += 5
    state = adaptiveSample(state, { rtt: i % 10 === 0 ? 1 : 0.1, inflight: 2, now }, options)
  }
  return { state, now }
}

// Ordinary requests (10 ms) with the limit in use, one sample per round trip, from `t0`.
function busy (state: AdaptiveLimit, t0: number, windows: number, options = o): { state: AdaptiveLimit, now: number } {
  let now = t0
  for (let i = 0; i < windows; i++) {
    now += 10
    state = adaptiveSample(state, { rtt: 10, inflight: state.limit, now }, options)
  }
  return { state, now }
}

t.test('a flood of cheap answers ratchets the limit down; once it has gone unused for idleMs it is a fresh limit', async (t) => {
  const warm = busy(newAdaptiveLimit(o, 0), 0, 15)
  t.ok(warm.state.limit > 30, `warm: ${warm.state.limit}`)
  // The reproduction: every busy turn reads as queueing against a 0.1 ms baseline and cuts the
  // limit (a cut applies at any in-flight count), and no quiet window can raise it (2 in flight
  // says nothing about a higher limit). A probe re-measures the same 0.1 ms.
  const flooded = flood(warm.state, warm.now, 3_000)
  t.ok(flooded.state.limit <= 10, `3 s of flood: ${flooded.state.limit}`)
  t.equal(flooded.state.baseline, 0.1)
  // 5 s with nothing in flight: the limit a burst meets is a fresh one's, and so are the limits the
  // burst's own samples lead to.
  const later = flooded.now + 5_000
  const idle = adaptiveTick(flooded.state, later, o, 0)
  const fresh = newAdaptiveLimit(o, later)
  t.same(idle, fresh, 'a fresh state: the initial limit, no RTT known')
  t.same(busy(idle, later, 20).state, busy(fresh, later, 20).state, 'the burst meets what a fresh server would')
})

// Regression (issue 33, item 15): a flood that ended during a probe left the limit low past idleMs:
// the probe's end, on the timer up to probeMaxMs later, counted as use and restarted the idle time.
t.test('a flood that ends during a probe: fresh idleMs after the limit was last used, on the timer as the gate runs it', async (t) => {
  const warm = busy(newAdaptiveLimit(o, 0), 0, 15)
  // The flood goes on until a probe starts, and ends there.
  let { state, now } = flood(warm.state, warm.now, 3_000)
  for (let i = 0; !state.probing; i++) {
    now += 5
    state = adaptiveSample(state, { rtt: i % 10 === 0 ? 1 : 0.1, inflight: 2, now }, o)
  }
  const lastUse = state.usedAt
  t.ok(lastUse <= now, 'the limit was last in use during the flood')
  // The gate's timer: a tick at each next change, until idleMs after the last use.
  for (let at = adaptiveTickAt(state, o); at <= lastUse + o.idleMs; at = adaptiveTickAt(state, o)) state = adaptiveTick(state, at, o, 0)
  t.same(state, newAdaptiveLimit(o, lastUse + o.idleMs), 'a fresh state idleMs after the last use: the probe\'s end is no use')
})

t.test('idle recovery: applied by the next sample when no tick came, only to a limit out of use', async (t) => {
  const warm = busy(newAdaptiveLimit(o, 0), 0, 15)
  const flooded = flood(warm.state, warm.now, 3_000)
  // Sparse ordinary requests after the flood, one at a time: they never use the limit, so they
  // do not hold it where the flood left it; the first one idleMs after the last use starts afresh.
  let state = flooded.state
  let now = flooded.now
  const limits: number[] = []
  for (let i = 0; i < 60; i++) {
    now += 100
    state = adaptiveSample(state, { rtt: 10, inflight: 1, now }, o)
    limits.push(state.limit)
  }
  t.ok(limits.slice(0, 5).every((l) => l <= 10), 'still low just after the flood')
  t.equal(state.limit, 20, `back to the initial limit: ${limits.join(' ')}`)
  t.equal(state.baseline, 10, 'the baseline learnt again from the first sample after it')
  // A sample that found the limit in use after a long gap (the end of a hang: everything stuck
  // completes) is no sign of idleness: it is news about the limit, not a fresh start.
  const hang = adaptiveSample(warm.state, { rtt: 5_000, inflight: warm.state.limit, now: warm.now + 10_000 }, o)
  t.ok(hang.limit < warm.state.limit, `cut: ${warm.state.limit} to ${hang.limit}`)
  t.equal(hang.baseline, 10)
})

t.test('idle recovery: never while the limit is in use, never below the limit learnt', async (t) => {
  const warm = busy(newAdaptiveLimit(o, 0), 0, 15)
  const { limit } = warm.state
  // A hang: nothing completes and the limit is full at every tick.
  const held = adaptiveTick(warm.state, warm.now + 1e6, o, limit)
  t.equal(held.limit, limit, 'the limit in use at the tick: kept')
  t.equal(held.baseline, 10)
  t.equal(adaptiveTick(held, warm.now + 1e6 + o.idleMs - 1, o, 0).limit, limit, 'in use at the last tick: the idle time starts there')
  t.same(adaptiveTick(held, warm.now + 1e6 + o.idleMs, o, 0), { ...newAdaptiveLimit(o, warm.now + 1e6 + o.idleMs), limit, estimate: warm.state.estimate },
    'a limit above the initial one is kept; what was learnt of the latency is not')
  t.equal(adaptiveTick(warm.state, warm.now + o.idleMs - 1, o, 0), warm.state, 'not idle long enough: the same state')
  t.equal(adaptiveTick(newAdaptiveLimit(o, 0), 1e9, o, 0).limit, 20, 'a fresh state has nothing to forget')
})
