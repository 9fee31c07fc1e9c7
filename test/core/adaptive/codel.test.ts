import t from 'tap'
import fc from 'fast-check'
import { codelOptions, codelSample, codelShare, codelSheds, newCodel, SHED_SCALE } from '../../../lib/core/index.js'
import type { Codel, CodelOptions } from '../../../lib/core/index.js'
import { simulateCpu } from './fixtures/cpu.js'

const o = codelOptions()

// The state after delays sampled at the given times.
function feed (samples: ReadonlyArray<readonly [now: number, delay: number]>, options = o, state = newCodel()): Codel[] {
  return samples.map(([now, delay]) => (state = codelSample(state, { delay, now }, options)))
}

t.test('options: the defaults, overrides on top, frozen; a fresh state sheds nothing', async (t) => {
  t.same(o, { targetMs: 5, intervalMs: 100, step: 0.1, maxShare: 0.9 })
  const mine = codelOptions({ targetMs: 10 })
  t.same(mine, { ...o, targetMs: 10 })
  t.ok(Object.isFrozen(o) && Object.isFrozen(mine))
  t.same(codelOptions({ targetMs: undefined, intervalMs: 50 }), { ...o, intervalMs: 50 }, 'an undefined override keeps the default')
  t.same(newCodel(), { above: false, aboveSince: 0, shedding: false, count: 0, nextAt: 0, shed: 0 })
  t.equal(SHED_SCALE, 1024)
  t.equal(codelShare(newCodel()), 0)
})

t.test('table: above target for an interval, then the control law, then below target', async (t) => {
  const s0 = newCodel()
  t.equal(codelSample(s0, { delay: 5, now: 10 }, o), s0, 'at target, idle: the same state')
  const [a, b, c] = feed([[10, 6], [60, 50], [109.9, 6]])
  t.same(a, { ...s0, above: true, aboveSince: 10 })
  t.same(b, a, 'above, not for an interval yet')
  t.same(c, a)
  const d = codelSample(c!, { delay: 6, now: 110 }, o)
  t.same(d, { above: true, aboveSince: 10, shedding: true, count: 1, nextAt: 210, shed: 103 }, 'ceil(0.1 * 1024)')
  t.equal(codelShare(d), 103 / 1024)
  t.same(codelSample(d, { delay: 6, now: 209 }, o), d, 'before the next step')
  const e = codelSample(d, { delay: 6, now: 210 }, o)
  t.same([e.count, e.nextAt, e.shed], [2, 210 + 100 / Math.SQRT2, Math.ceil(0.1 * Math.SQRT2 * 1024)])
  // Several steps due by one sample.
  const f = codelSample(e, { delay: 100, now: 400 }, o)
  t.equal(f.count, 5, 'steps due at 280.7, 338.4 and 388.4')
  t.equal(f.shed, Math.ceil(0.1 * Math.sqrt(5) * 1024))
  // At target: stops at once, keeps its count and schedule.
  const g = codelSample(f, { delay: 5, now: 410 }, o)
  t.same(g, { ...f, above: false, shedding: false, shed: 0 })
  t.equal(codelSample(g, { delay: 1, now: 420 }, o), g, 'and stays')
  // Above again: an interval first, then it resumes at count - 2.
  const [h, i] = feed([[420, 9], [520, 9]], o, g)
  t.notOk(h!.shedding)
  t.same([i!.shedding, i!.count, i!.nextAt, i!.shed], [true, 3, 520 + 100 / Math.sqrt(3), Math.ceil(0.1 * Math.sqrt(3) * 1024)])
  // Not within 16 intervals of the last step, or a count of 2 or less: from 1.
  t.ok(f.nextAt < 500)
  const late = feed([[2000, 9], [2100, 9]], o, g)[1]!
  t.same([late.shedding, late.count], [true, 1])
  const [, , early] = feed([[0, 9], [100, 9], [110, 1]])
  t.equal(feed([[120, 9], [220, 9]], o, early)[1]!.count, 1)
})

t.test('the share stops at maxShare, and a long gap between samples costs no extra work', async (t) => {
  const start = feed([[0, 9], [100, 9]])[1]!
  const most = Math.floor(0.9 * 1024)
  const steps = Math.ceil((0.9 / 0.1) ** 2) // the count where the share reaches 0.9
  const s = codelSample(start, { delay: 9, now: 1e12 }, o)
  t.equal(s.shed, most)
  t.equal(s.count, steps)
  t.equal(s.nextAt, 1e12 + 100 / Math.sqrt(steps), 'the schedule moves on from now')
  t.same(codelSample(s, { delay: 9, now: 2e12 }, o).count, steps)
  const all = codelOptions({ maxShare: 1, step: 1 })
  t.equal(feed([[0, 9], [100, 9]], all)[1]!.shed, 1024)
})

t.test('codelSheds: exactly `shed` of every 1024 aligned counters, evenly spread', async (t) => {
  const withShed = (shed: number): Codel => ({ ...newCodel(), shedding: shed > 0, shed })
  for (const shed of [0, 1, 103, 512, 921, 1023, 1024]) {
    const s = withShed(shed)
    let n = 0
    for (let c = 0; c < 1024; c++) if (codelSheds(s, c)) n++
    t.equal(n, shed, `shed ${shed}`)
  }
  t.notOk(codelSheds(withShed(0), 7))
  t.ok(codelSheds(withShed(1024), 7))
  fc.assert(fc.property(fc.integer({ min: 0, max: 1024 }), fc.nat(1e9), fc.integer({ min: 1, max: 3000 }), (shed, from, n) => {
    const s = withShed(shed)
    let k = 0
    for (let c = from; c < from + n; c++) if (codelSheds(s, c)) k++
    const ideal = (n * shed) / 1024
    return k >= Math.floor(ideal) - 1 && k <= Math.ceil(ideal) + 1 && codelSheds(s, from) === codelSheds(s, from + 1024 * 7)
  }))
  t.pass('any run of n counters sheds n * share, within one')
})

t.test('a server at full utilization with delay under target sheds nothing', async (t) => {
  const steps = simulateCpu(o, [{ ms: 60_000, arrivals: 10 }])
  t.ok(steps.every((s) => s.shed === 0 && s.state.shed === 0))
  t.equal(steps.reduce((a, s) => a + s.served, 0), 600_000, 'every request served, at 100 % utilization')
})

t.test('spikes above target shorter than an interval never shed', async (t) => {
  // 90 ms above target (up to 500 ms of delay) then one sample at target, repeated.
  const samples: Array<[number, number]> = []
  for (let now = 10; now <= 60_000; now += 10) samples.push([now, now % 100 === 0 ? 5 : 500])
  t.ok(feed(samples).every((s) => s.shed === 0))
  // The same, shifted so each spike lasts exactly the interval minus a sample: still none.
  t.ok(feed(samples.map(([now, delay]) => [now + 5, delay])).every((s) => s.shed === 0))
})

t.test('a standing delay: shedding starts after one interval, grows, stops below target', async (t) => {
  const samples: Array<[number, number]> = []
  for (let now = 10; now <= 3000; now += 10) samples.push([now, now <= 2500 ? 20 : 4])
  const states = feed(samples)
  const first = states.findIndex((s) => s.shed > 0)
  t.equal(samples[first]![0], 110, 'the first shedding sample is one interval after the first above target')
  const shares = states.slice(first, 250).map((s) => s.shed)
  t.ok(shares.every((x, i) => i === 0 || x >= shares[i - 1]!), 'the share never falls while above target')
  t.ok(shares.at(-1)! > 4 * shares[0]!, `and grows: ${shares[0]} to ${shares.at(-1)} of 1024`)
  // After step k (count k) the next is due 100 / sqrt(k) ms later; the share 0.1 * sqrt(k) reaches
  // 0.9 at k = 81.
  let due = 110
  for (let k = 1; k < 81; k++) due += 100 / Math.sqrt(k)
  const full = states.findIndex((s) => s.shed === Math.floor(0.9 * 1024))
  t.equal(samples[full]![0], Math.ceil(due / 10) * 10, `maxShare at the first sample after ${Math.round(due)} ms`)
  t.ok(states.slice(250).every((s) => s.shed === 0), 'none once the delay is under target')
})

t.test('synthetic CPU overload: sheds what is needed, keeps the server busy, stops when the load does', async (t) => {
  // [arrivals per ms (capacity 10), the share that must be shed, a bound on the delay (ms)]. The
  // delay bounds are measured ones with a margin: CoDel's cycle lets about (overload - 1) * interval
  // of delay build up before each restart.
  for (const [arrivals, needed, delayBound] of [[12, 1 / 6, 30], [15, 1 / 3, 65], [20, 1 / 2, 120], [40, 3 / 4, 350]] as const) {
    const steps = simulateCpu(o, [{ ms: 60_000, arrivals }, { ms: 10_000, arrivals: 9 }])
    const loaded = steps.slice(500, 6000)
    const sum = (pick: (s: typeof loaded[number]) => number): number => loaded.reduce((a, s) => a + pick(s), 0)
    const share = sum((s) => s.shed) / sum((s) => s.arrived)
    t.ok(Math.abs(share - needed) < 0.02, `${arrivals / 10}x: shed ${share.toFixed(3)}, needed ${needed.toFixed(3)}`)
    t.ok(sum((s) => s.served) / (loaded.length * 100) > 0.98, 'the server stays busy (utilization > 98 %)')
    const worst = loaded.reduce((a, s) => Math.max(a, s.delay), 0)
    t.ok(worst <= delayBound, `delay at most ${worst.toFixed(1)} ms, mean ${(sum((s) => s.delay) / loaded.length).toFixed(1)} ms`)
    const after = steps.slice(6000)
    const quiet = after.findIndex((s) => s.state.shed === 0 && s.delay <= o.targetMs)
    t.ok(quiet >= 0 && quiet < 50, `the load back under capacity: quiet within ${(quiet + 1) * 10} ms`)
    t.ok(after.slice(quiet + 1).every((s) => s.shed === 0 && s.state.shed === 0), 'and sheds nothing after')
  }
})

const optionsArb = fc.record({
  targetMs: fc.double({ min: 0.001, max: 100, noNaN: true }),
  intervalMs: fc.double({ min: 0.001, max: 1000, noNaN: true }),
  step: fc.double({ min: 0.001, max: 1, noNaN: true }),
  maxShare: fc.double({ min: 1 / 1024, max: 1, noNaN: true })
}).map((r): CodelOptions => codelOptions(r))

t.test('property: never sheds when every sample is at or under target', async (t) => {
  fc.assert(fc.property(optionsArb, fc.array(fc.tuple(fc.double({ min: 0, max: 1, noNaN: true }), fc.double({ min: -10, max: 1000, noNaN: true })), { maxLength: 200 }), fc.nat(), (opts, events, counter) => {
    let state = newCodel()
    let now = 0
    for (const [fraction, dt] of events) {
      now += dt
      state = codelSample(state, { delay: fraction * opts.targetMs, now }, opts)
      if (state.shed !== 0 || state.shedding || codelSheds(state, counter++)) return false
    }
    return true
  }), { numRuns: 300 })
  t.pass('holds')
})

t.test('property: sheds only after an interval above target, an integer share up to maxShare', async (t) => {
  fc.assert(fc.property(optionsArb, fc.array(fc.tuple(fc.double({ min: 0, max: 3, noNaN: true }), fc.double({ min: 0, max: 500, noNaN: true })), { maxLength: 200 }), (opts, events) => {
    let state = newCodel()
    let now = 0
    let aboveSince: number | undefined
    for (const [ratio, dt] of events) {
      now += dt
      const delay = ratio * opts.targetMs
      aboveSince = delay > opts.targetMs ? aboveSince ?? now : undefined
      state = codelSample(state, { delay, now }, opts)
      if (!Number.isInteger(state.shed) || state.shed < 0 || state.shed > Math.floor(opts.maxShare * 1024)) return false
      if (state.shed > 0 && (aboveSince === undefined || now - aboveSince < opts.intervalMs)) return false
      if (state.shedding !== state.shed > 0) return false
    }
    return true
  }), { numRuns: 300 })
  t.pass('holds')
})
