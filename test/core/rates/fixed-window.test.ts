import t from 'tap'
import fc from 'fast-check'
import assert from 'node:assert/strict'
import { fixedWindow } from '../../../lib/core/rates/index.js'
import type { Policy } from '../../../lib/core/rates/index.js'
import { agreesWithModel, checkCharges, held, deterministic, recoveredIsFresh, moreIsExact, resetIsExact, retryIsLeast, roundTrips, run, scenarioArb } from './fixtures/harness.js'
import type { Model } from './fixtures/harness.js'

// Reference model: a count per aligned window index. Calls count into the window of the furthest
// time seen (a clock that steps back keeps counting into the live window).
class FixedWindowModel implements Model {
  counts = new Map<number, number>()
  clock: number
  constructor (readonly policy: Policy, t0: number) { this.clock = t0 }

  private window (now: number): number {
    return Math.floor(Math.max(this.clock, now) / this.policy.windowMs)
  }

  private used (now: number): number {
    return held(this.counts, this.window(now), this.policy.limit)
  }

  consume (now: number, cost: number): { allowed: boolean, remaining: number } {
    const w = this.window(now)
    this.clock = Math.max(this.clock, now)
    const allowed = this.used(now) + cost <= this.policy.limit
    if (allowed) this.counts.set(w, (this.counts.get(w) ?? 0) + cost)
    return { allowed, remaining: Math.max(0, this.policy.limit - this.used(now)) }
  }

  // Into the live window: at most 2 * limit held (one window of debt), at least 0.
  charge (now: number, units: number): { allowed: boolean, remaining: number } {
    const w = this.window(now)
    this.clock = Math.max(this.clock, now)
    const used = this.used(now)
    const by = units > 0 ? Math.max(0, Math.min(units, 2 * this.policy.limit - used)) : -Math.min(used, -units)
    this.counts.set(w, (this.counts.get(w) ?? 0) + by)
    return { allowed: this.admits(now, 1), remaining: Math.max(0, this.policy.limit - this.used(now)) }
  }

  admits (now: number, cost: number): boolean {
    return this.used(now) + cost <= this.policy.limit
  }

  full (now: number): boolean {
    return this.used(now) === 0
  }
}

const smallSizes = { maxLimit: 12, maxWindow: 40, maxOps: 25 }
const realistic = { maxLimit: 10_000, maxWindow: 86_400_000, maxOps: 30, maxStart: 4_000_000_000_000 }
const opts = { numRuns: 150 }

t.test('table', async (t) => {
  const p: Policy = { algorithm: 'fixed-window', limit: 3, windowMs: 100 }
  const s0 = fixedWindow.fresh(p, 1234)
  t.same(s0, { start: 1200, count: 0 }, 'windows aligned to multiples of windowMs')
  t.equal(fixedWindow.recoversAt(s0, p), 1200)
  const a = fixedWindow.consume(s0, p, 1250, 2)
  t.same(a, { allowed: true, remaining: 1, retryAfterMs: 0, resetAt: 1300, moreAt: 1300, state: { start: 1200, count: 2 } })
  const b = fixedWindow.consume(a.state, p, 1260, 2)
  t.same(b, { allowed: false, remaining: 1, retryAfterMs: 40, resetAt: 1300, moreAt: 1300, state: a.state })
  const c = fixedWindow.consume(b.state, p, 1300, 3)
  t.same(c, { allowed: true, remaining: 0, retryAfterMs: 0, resetAt: 1400, moreAt: 1400, state: { start: 1300, count: 3 } })
  // The clock steps back into the previous window: the live counter is kept.
  const d = fixedWindow.consume(c.state, p, 1299, 1)
  t.same(d, { allowed: false, remaining: 0, retryAfterMs: 101, resetAt: 1400, moreAt: 1400, state: c.state })
  t.equal(fixedWindow.recoversAt(c.state, p), 1400)
})

t.test('(a) every decision field equals the reference model\'s', async (t) => {
  fc.assert(fc.property(scenarioArb('fixed-window', smallSizes), (s) => {
    agreesWithModel(fixedWindow, s, new FixedWindowModel(s.policy, s.t0))
  }), opts)
  t.pass('holds')
})

t.test('(b) admitted cost per aligned window <= limit', async (t) => {
  fc.assert(fc.property(scenarioArb('fixed-window', { ...smallSizes, maxOps: 40 }), (s) => {
    const per = new Map<number, number>()
    for (const { clock, cost, out } of run(fixedWindow, s)) {
      if (!out.allowed) continue
      const w = Math.floor(clock / s.policy.windowMs)
      per.set(w, (per.get(w) ?? 0) + cost)
      assert.ok(per.get(w)! <= s.policy.limit)
    }
  }), opts)
  t.pass('holds')
})

t.test('(c) retryAfterMs is never early and least (small and realistic policies)', async (t) => {
  let denials = 0
  for (const sizes of [smallSizes, realistic]) {
    fc.assert(fc.property(scenarioArb('fixed-window', sizes), (s) => { denials += retryIsLeast(fixedWindow, s) }), opts)
  }
  t.ok(denials > 100, `${denials} denials checked`)
})

t.test('(d) resetAt is the first tick of full capacity', async (t) => {
  for (const sizes of [smallSizes, realistic]) {
    fc.assert(fc.property(scenarioArb('fixed-window', sizes), (s) => resetIsExact(fixedWindow, s)), opts)
  }
  t.pass('holds')
})

t.test("(d') moreAt is the first tick of one more unit (RateLimit's t)", async (t) => {
  let checked = 0
  for (const sizes of [smallSizes, realistic]) {
    fc.assert(fc.property(scenarioArb('fixed-window', sizes), (s) => { checked += moreIsExact(fixedWindow, s) }), opts)
  }
  t.ok(checked > 100, `${checked} outcomes below capacity checked`)
})

t.test('(e) deterministic, inputs untouched; (f) a recovered state is a fresh one; rows round-trip', async (t) => {
  fc.assert(fc.property(scenarioArb('fixed-window', smallSizes), fc.nat(80), fc.integer({ min: 1, max: 20 }), (s, extra, cost) => {
    deterministic(fixedWindow, s)
    recoveredIsFresh(fixedWindow, s, extra, cost)
    roundTrips(fixedWindow, s)
  }), opts)
  t.pass('holds')
})

t.test('charges: a debt flows into the windows after, limit each; every property holds with the model', async (t) => {
  const { denials, mores, charges } = checkCharges(fixedWindow, 'fixed-window', [smallSizes, realistic], (s) => new FixedWindowModel(s.policy, s.t0))
  t.ok(charges > 500 && denials > 100 && mores > 100, `${charges} charges, ${denials} refusals, ${mores} moreAt checked`)
})

t.test('charges: table', async (t) => {
  const p: Policy = { algorithm: 'fixed-window', limit: 3, windowMs: 100 }
  const s0 = fixedWindow.fresh(p, 1200)
  // 5 units into a window of 3: 2 owed into the next one.
  const a = fixedWindow.charge(s0, p, 1250, 5)
  t.same(a, { allowed: false, remaining: 0, retryAfterMs: 50, resetAt: 1400, moreAt: 1300, state: { start: 1200, count: 5 } })
  const b = fixedWindow.consume(a.state, p, 1300, 1)
  t.same(b, { allowed: true, remaining: 0, retryAfterMs: 0, resetAt: 1400, moreAt: 1400, state: { start: 1300, count: 3 } })
  // At most one window of debt: 2 * limit held.
  t.same(fixedWindow.charge(s0, p, 1250, 3).state, { start: 1200, count: 3 })
  t.same(fixedWindow.charge(fixedWindow.charge(s0, p, 1250, 3).state, p, 1251, 3).state, { start: 1200, count: 6 })
  t.same(fixedWindow.charge({ start: 1200, count: 6 }, p, 1251, 3).state, { start: 1200, count: 6 }, 'saturates')
  t.equal(fixedWindow.charge({ start: 1200, count: 6 }, p, 1251, 3).retryAfterMs, 149, 'the window after holds the rest: admitted when it ends')
  // Returned units: never below 0, never into a window that is gone.
  t.same(fixedWindow.charge({ start: 1200, count: 2 }, p, 1250, -3).state, { start: 1200, count: 0 })
  t.same(fixedWindow.charge({ start: 1200, count: 2 }, p, 1300, -1).state, { start: 1300, count: 0 })
})
