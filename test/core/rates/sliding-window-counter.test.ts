import t from 'tap'
import fc from 'fast-check'
import assert from 'node:assert/strict'
import { slidingWindowCounter as swc } from '../../../lib/core/rates/index.js'
import type { Policy } from '../../../lib/core/rates/index.js'
import {
  add, agreesWithModel, checkCharges, held, cmp, deterministic, floorOf, frac, le, recoveredIsFresh, moreIsExact, resetIsExact, retryIsLeast,
  roundTrips, run, scenarioArb, sub
} from './fixtures/harness.js'
import type { Frac, Model } from './fixtures/harness.js'

// Reference model: a count per aligned window index, and the estimate as an exact rational:
// count(w - 1) * (W - e) / W + count(w) at elapsed time e in window w. Calls count into the window
// of the furthest time seen; a call from before that window's start is taken at its start.
class SlidingModel implements Model {
  counts = new Map<number, number>()
  clock: number
  constructor (readonly policy: Policy, t0: number) { this.clock = t0 }

  // What window w holds, a debt that flowed in included (`held`); a previous window's share is at
  // most the limit (the rest of it flowed on).
  private count (w: number): number {
    return held(this.counts, w, this.policy.limit)
  }

  private where (now: number): { w: number, e: number } {
    const W = this.policy.windowMs
    const w = Math.floor(Math.max(this.clock, now) / W)
    return { w, e: Math.max(0, now - w * W) }
  }

  /** The previous window's weighted share at `now`, and the window index. */
  private estimate (now: number): { w: number, share: Frac, est: Frac } {
    const W = this.policy.windowMs
    const { w, e } = this.where(now)
    const share = frac(Math.min(this.policy.limit, this.count(w - 1)) * (W - e), W)
    return { w, share, est: add(share, frac(this.count(w))) }
  }

  consume (now: number, cost: number): { allowed: boolean, remaining: number } {
    const { w, share, est } = this.estimate(now)
    this.clock = Math.max(this.clock, now)
    const allowed = le(add(est, frac(cost)), frac(this.policy.limit))
    if (allowed) this.counts.set(w, (this.counts.get(w) ?? 0) + cost)
    // The largest k with share + count(w) + k <= limit.
    const remaining = Math.max(0, floorOf(sub(sub(frac(this.policy.limit), share), frac(this.count(w)))))
    return { allowed, remaining }
  }

  // Into the live window: at most 2 * limit held there (one window of debt), at least 0.
  charge (now: number, units: number): { allowed: boolean, remaining: number } {
    const { w, share } = this.estimate(now)
    this.clock = Math.max(this.clock, now)
    const used = this.count(w)
    const by = units > 0 ? Math.max(0, Math.min(units, 2 * this.policy.limit - used)) : -Math.min(used, -units)
    this.counts.set(w, (this.counts.get(w) ?? 0) + by)
    const remaining = Math.max(0, floorOf(sub(sub(frac(this.policy.limit), share), frac(this.count(w)))))
    return { allowed: this.admits(now, 1), remaining }
  }

  admits (now: number, cost: number): boolean {
    return le(add(this.estimate(now).est, frac(cost)), frac(this.policy.limit))
  }

  full (now: number): boolean {
    return cmp(this.estimate(now).est, frac(0)) === 0
  }
}

const smallSizes = { maxLimit: 12, maxWindow: 40, maxOps: 25 }
const realistic = { maxLimit: 10_000, maxWindow: 86_400_000, maxOps: 30, maxStart: 4_000_000_000_000 }
const opts = { numRuns: 150 }

t.test('table', async (t) => {
  const p: Policy = { algorithm: 'sliding-window-counter', limit: 10, windowMs: 100 }
  const s0 = swc.fresh(p, 1234)
  t.same(s0, { start: 1200, previous: 0, current: 0 })
  t.equal(swc.recoversAt(s0, p), 1200)
  const a = swc.consume(s0, p, 1250, 8)
  t.same(a, { allowed: true, remaining: 2, retryAfterMs: 0, resetAt: 1400, moreAt: 1313, state: { start: 1200, previous: 0, current: 8 } })
  // Next window, e = 25: estimate 8 * 75 / 100 = 6, + 4 = 10 <= 10.
  const b = swc.consume(a.state, p, 1325, 4)
  t.same(b, { allowed: true, remaining: 0, retryAfterMs: 0, resetAt: 1500, moreAt: 1338, state: { start: 1300, previous: 8, current: 4 } })
  // e = 30: 8 * 70 / 100 = 5.6 + 4 + 1 > 10; room 5 => W - e' <= floor(500 / 8) = 62, e' = 38.
  const c = swc.consume(b.state, p, 1330, 1)
  t.same(c, { allowed: false, remaining: 0, retryAfterMs: 8, resetAt: 1500, moreAt: 1338, state: b.state })
  t.notOk(swc.consume(c.state, p, 1337, 1).allowed)
  t.ok(swc.consume(c.state, p, 1338, 1).allowed)
  // current + cost > limit: next window, e' >= ceil(W * (4 + 8 - 10) / 4) = 50.
  const d = swc.consume(b.state, p, 1330, 8)
  t.same(d, { allowed: false, remaining: 0, retryAfterMs: 70 + 50, resetAt: 1500, moreAt: 1338, state: b.state })
  // cost = limit with a current count: the window after next.
  const e = swc.consume(b.state, p, 1330, 10)
  t.equal(e.retryAfterMs, 70 + 100)
  // Two windows on, both counts are gone; a clock that steps back stays in the live window, at e = 0.
  t.same(swc.consume(b.state, p, 1500, 10).state, { start: 1500, previous: 0, current: 10 })
  const f = swc.consume(b.state, p, 1250, 1)
  t.same(f, { allowed: false, remaining: 0, retryAfterMs: 50 + 38, resetAt: 1500, moreAt: 1338, state: b.state })
  t.equal(swc.recoversAt({ start: 1300, previous: 8, current: 0 }, p), 1400)
})

t.test('(a) every decision field equals the reference model\'s (retry by stepping t = 1, 2, …)', async (t) => {
  fc.assert(fc.property(scenarioArb('sliding-window-counter', smallSizes), (s) => {
    agreesWithModel(swc, s, new SlidingModel(s.policy, s.t0))
  }), { numRuns: 300 })
  t.pass('holds')
})

t.test('(b) per aligned window <= limit, and the estimate after every admission <= limit', async (t) => {
  fc.assert(fc.property(scenarioArb('sliding-window-counter', { ...smallSizes, maxOps: 40 }), (s) => {
    const { limit, windowMs: W } = s.policy
    const per = new Map<number, number>()
    for (const { now, clock, cost, out } of run(swc, s)) {
      if (!out.allowed) continue
      const w = Math.floor(clock / W)
      per.set(w, (per.get(w) ?? 0) + cost)
      assert.ok(per.get(w)! <= limit)
      const { start, previous, current } = out.state
      const e = BigInt(Math.max(0, now - start))
      assert.ok(BigInt(previous) * (BigInt(W) - e) + BigInt(current) * BigInt(W) <= BigInt(limit) * BigInt(W))
    }
  }), opts)
  t.pass('holds')
})

t.test('(c) retryAfterMs is never early and least (small and realistic policies)', async (t) => {
  let denials = 0
  for (const sizes of [smallSizes, realistic]) {
    fc.assert(fc.property(scenarioArb('sliding-window-counter', sizes), (s) => { denials += retryIsLeast(swc, s) }), opts)
  }
  t.ok(denials > 100, `${denials} denials checked`)
})

t.test('(d) resetAt is the first tick of full capacity', async (t) => {
  for (const sizes of [smallSizes, realistic]) {
    fc.assert(fc.property(scenarioArb('sliding-window-counter', sizes), (s) => resetIsExact(swc, s)), opts)
  }
  t.pass('holds')
})

t.test("(d') moreAt is the first tick of one more unit (RateLimit's t)", async (t) => {
  let checked = 0
  for (const sizes of [smallSizes, realistic]) {
    fc.assert(fc.property(scenarioArb('sliding-window-counter', sizes), (s) => { checked += moreIsExact(swc, s) }), opts)
  }
  t.ok(checked > 100, `${checked} outcomes below capacity checked`)
})

t.test('(e) deterministic, inputs untouched; (f) a recovered state is a fresh one; rows round-trip', async (t) => {
  fc.assert(fc.property(scenarioArb('sliding-window-counter', smallSizes), fc.nat(80), fc.integer({ min: 1, max: 20 }), (s, extra, cost) => {
    deterministic(swc, s)
    recoveredIsFresh(swc, s, extra, cost)
    roundTrips(swc, s)
  }), opts)
  t.pass('holds')
})

t.test('large limit * windowMs stays exact', async (t) => {
  // limit * W close to 2^53: the integer forms never leave the safe range.
  const p: Policy = { algorithm: 'sliding-window-counter', limit: 2 ** 26 - 1, windowMs: 2 ** 27 - 3 }
  const W = p.windowMs
  const a = swc.consume(swc.fresh(p, 0), p, 0, p.limit)
  const b = swc.consume(a.state, p, W + 1, 1)
  t.notOk(b.allowed)
  t.ok(swc.consume(b.state, p, W + 1 + b.retryAfterMs, 1).allowed)
  t.notOk(swc.consume(b.state, p, W + b.retryAfterMs, 1).allowed)
  const c = swc.consume(a.state, p, 1, p.limit)
  t.equal(c.retryAfterMs, 2 * W - 1)
})

t.test('charges: a debt flows into the windows after, limit each; every property holds with the model', async (t) => {
  const { denials, mores, charges } = checkCharges(swc, 'sliding-window-counter', [smallSizes, realistic], (s) => new SlidingModel(s.policy, s.t0))
  t.ok(charges > 500 && denials > 100 && mores > 100, `${charges} charges, ${denials} refusals, ${mores} moreAt checked`)
})

t.test('charges: table', async (t) => {
  const p: Policy = { algorithm: 'sliding-window-counter', limit: 10, windowMs: 100 }
  const s0 = swc.fresh(p, 1200)
  // 15 units into a window of 10: 5 owed into the next one.
  const a = swc.charge(s0, p, 1250, 15)
  t.same(a.state, { start: 1200, previous: 0, current: 15 })
  t.same([a.allowed, a.remaining, a.resetAt], [false, 0, 1500])
  // At 1300 the window holds the 5 owed and the previous one its 10: a unit passes at e' with
  // 10 * (100 - e') <= 4 * 100, e' = 60.
  t.equal(a.retryAfterMs, 110)
  t.same(swc.consume(a.state, p, 1300, 1).state, { start: 1300, previous: 10, current: 5 })
  t.notOk(swc.consume(a.state, p, 1359, 1).allowed)
  t.ok(swc.consume(a.state, p, 1360, 1).allowed)
  t.same(swc.charge(swc.charge(s0, p, 1250, 10).state, p, 1251, 15).state, { start: 1200, previous: 0, current: 20 }, 'saturates at 2 * limit')
  t.same(swc.charge({ start: 1200, previous: 4, current: 2 }, p, 1250, -3).state, { start: 1200, previous: 4, current: 0 }, 'units come back from the current window only')
})
