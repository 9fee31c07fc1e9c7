import t from 'tap'
import fc from 'fast-check'
import assert from 'node:assert/strict'
import { gcra, gcraScale } from '../../../lib/core/rates/index.js'
import type { Policy } from '../../../lib/core/rates/index.js'
import {
  add, agreesWithModel, capacityOf, checkCharges, fmin, deterministic, floorOf, fmax, frac, le, mul, recoveredIsFresh, moreIsExact, resetIsExact,
  retryIsLeast, roundTrips, run, scenarioArb, sub
} from './fixtures/harness.js'
import type { Frac, Model, Scenario } from './fixtures/harness.js'

// Reference model: textbook GCRA in exact rational milliseconds. Emission interval I = W / limit,
// tolerance tau = burst * I, one theoretical arrival time. No scaling.
class GcraModel implements Model {
  tat: Frac
  readonly I: Frac
  readonly tau: Frac
  constructor (readonly policy: Policy, t0: number) {
    this.tat = frac(t0)
    this.I = frac(policy.windowMs, policy.limit)
    this.tau = mul(this.I, capacityOf(policy))
  }

  private next (now: number, cost: number): Frac {
    return add(fmax(this.tat, frac(now)), mul(this.I, cost))
  }

  consume (now: number, cost: number): { allowed: boolean, remaining: number } {
    const allowed = this.admits(now, cost)
    if (allowed) this.tat = this.next(now, cost)
    // The largest k with max(tat, now) + k * I - now <= tau.
    const slack = sub(this.tau, sub(fmax(this.tat, frac(now)), frac(now)))
    const remaining = Math.max(0, floorOf({ n: slack.n * this.I.d, d: slack.d * this.I.n }))
    return { allowed, remaining }
  }

  // tat moves by units * I from max(tat, now): ahead at most now + 2 * tau, back to now at most;
  // a charge never moves it back.
  charge (now: number, units: number): { allowed: boolean, remaining: number } {
    const base = fmax(this.tat, frac(now))
    const moved = add(base, mul(this.I, units))
    this.tat = units > 0 ? fmax(base, fmin(moved, add(frac(now), mul(this.tau, 2)))) : fmax(frac(now), moved)
    const slack = sub(this.tau, sub(fmax(this.tat, frac(now)), frac(now)))
    return { allowed: this.admits(now, 1), remaining: Math.max(0, floorOf({ n: slack.n * this.I.d, d: slack.d * this.I.n })) }
  }

  admits (now: number, cost: number): boolean {
    return le(sub(this.next(now, cost), frac(now)), this.tau)
  }

  full (now: number): boolean {
    return le(this.tat, frac(now))
  }
}

const smallSizes = { maxLimit: 12, maxWindow: 30, maxBurst: 10, maxOps: 20 }
// s = limit / gcd(limit, windowMs) <= 1000, so now * s stays far below 2^53 up to 2100.
const realistic = { maxLimit: 1000, maxWindow: 3_600_000, maxBurst: 2000, maxOps: 30, maxStart: 4_102_444_800_000 }
const opts = { numRuns: 150 }

t.test('gcraScale', async (t) => {
  t.equal(gcraScale({ limit: 100, windowMs: 60_000 }), 1)
  t.equal(gcraScale({ limit: 7, windowMs: 1000 }), 7)
  t.equal(gcraScale({ limit: 1000, windowMs: 1 }), 1000)
  t.equal(gcraScale({ limit: 6, windowMs: 4 }), 3)
})

t.test('table', async (t) => {
  // 3 per 10 ms: s = 3 units per ms, T = 10 units (3.33 ms).
  const p: Policy = { algorithm: 'gcra', limit: 3, windowMs: 10, burst: 2 }
  const s0 = gcra.fresh(p, 100)
  t.same(s0, { tat: 300 })
  t.equal(gcra.recoversAt(s0, p), 100)
  const a = gcra.consume(s0, p, 100, 2)
  t.same(a, { allowed: true, remaining: 0, retryAfterMs: 0, resetAt: 107, moreAt: 104, state: { tat: 320 } })
  const b = gcra.consume(a.state, p, 101, 1)
  // admitted at x once 330 - 3x <= 20, x >= 103.33: wait 3 ms.
  t.same(b, { allowed: false, remaining: 0, retryAfterMs: 3, resetAt: 107, moreAt: 104, state: { tat: 320 } })
  t.ok(gcra.consume(b.state, p, 104, 1).allowed)
  t.notOk(gcra.consume(b.state, p, 103, 1).allowed)
  // A clock that steps back: tat does not move, the wait counts from now.
  const c = gcra.consume(a.state, p, 90, 1)
  t.same(c, { allowed: false, remaining: 0, retryAfterMs: 14, resetAt: 107, moreAt: 104, state: { tat: 320 } })
  // burst defaults to limit
  const q: Policy = { algorithm: 'gcra', limit: 4, windowMs: 1000 }
  t.equal(gcra.consume(gcra.fresh(q, 0), q, 0, 4).allowed, true)
})

t.test('(a) every decision field equals the reference model\'s; tat / s is the model\'s tat', async (t) => {
  fc.assert(fc.property(scenarioArb('gcra', smallSizes), (s: Scenario) => {
    agreesWithModel(gcra, s, new GcraModel(s.policy, s.t0))
    const model = new GcraModel(s.policy, s.t0)
    const scale = BigInt(gcraScale(s.policy))
    for (const { now, cost, out } of run(gcra, s)) {
      model.consume(now, cost)
      assert.equal(BigInt(out.state.tat) * model.tat.d, model.tat.n * scale)
    }
  }), opts)
  t.pass('holds')
})

t.test('(b) admitted cost in any interval [a, b] <= burst + floor((b - a) * limit / windowMs)', async (t) => {
  fc.assert(fc.property(scenarioArb('gcra', { ...smallSizes, maxOps: 40 }), (s) => {
    const admitted = run(gcra, s).filter((x) => x.out.allowed)
    const cap = capacityOf(s.policy)
    for (let i = 0; i < admitted.length; i++) {
      let sum = 0
      for (let j = i; j < admitted.length; j++) {
        sum += admitted[j]!.cost
        const span = admitted[j]!.clock - admitted[i]!.clock
        assert.ok(sum <= cap + Math.floor((span * s.policy.limit) / s.policy.windowMs), `${sum} in ${span} ms`)
      }
    }
  }), opts)
  t.pass('holds')
})

t.test('(c) retryAfterMs is never early and least (small and realistic policies)', async (t) => {
  let denials = 0
  for (const sizes of [smallSizes, realistic]) {
    fc.assert(fc.property(scenarioArb('gcra', sizes), (s) => { denials += retryIsLeast(gcra, s) }), opts)
  }
  t.ok(denials > 100, `${denials} denials checked`)
})

t.test('(d) resetAt is the first tick of full capacity', async (t) => {
  for (const sizes of [smallSizes, realistic]) {
    fc.assert(fc.property(scenarioArb('gcra', sizes), (s) => resetIsExact(gcra, s)), opts)
  }
  t.pass('holds')
})

t.test("(d') moreAt is the first tick of one more unit (RateLimit's t)", async (t) => {
  let checked = 0
  for (const sizes of [smallSizes, realistic]) {
    fc.assert(fc.property(scenarioArb('gcra', sizes), (s) => { checked += moreIsExact(gcra, s) }), opts)
  }
  t.ok(checked > 100, `${checked} outcomes below capacity checked`)
})

t.test('(e) deterministic, inputs untouched; (f) a recovered state is a fresh one; rows round-trip', async (t) => {
  fc.assert(fc.property(scenarioArb('gcra', smallSizes), fc.nat(40), fc.integer({ min: 1, max: 20 }), (s, extra, cost) => {
    deterministic(gcra, s)
    recoveredIsFresh(gcra, s, extra, cost)
    roundTrips(gcra, s)
  }), opts)
  t.pass('holds')
})

t.test('charges: tat up to two tolerances ahead, a debt that time repays; every property holds with the model', async (t) => {
  const { denials, mores, charges } = checkCharges(gcra, 'gcra', [smallSizes, realistic], (s) => new GcraModel(s.policy, s.t0))
  t.ok(charges > 500 && denials > 100 && mores > 100, `${charges} charges, ${denials} refusals, ${mores} moreAt checked`)
})

t.test('charges: table', async (t) => {
  // 1 per 10 ms, burst 2: s = 1, T = 10, tau = 20.
  const p: Policy = { algorithm: 'gcra', limit: 1, windowMs: 10, burst: 2 }
  const s0 = gcra.fresh(p, 1000)
  const a = gcra.charge(s0, p, 1000, 3)
  t.same(a, { allowed: false, remaining: 0, retryAfterMs: 20, resetAt: 1030, moreAt: 1020, state: { tat: 1030 } })
  t.same(gcra.charge(a.state, p, 1000, 2).state, { tat: 1040 }, 'two tolerances ahead at most')
  t.same(gcra.charge(a.state, p, 1000, -5).state, { tat: 1000 }, 'back to now at most')
})
