import t from 'tap'
import fc from 'fast-check'
import assert from 'node:assert/strict'
import { bucket, newBucket, take } from '../../../lib/core/bucket.js'
import { tokenBucket } from '../../../lib/core/rates/index.js'
import type { Policy } from '../../../lib/core/rates/index.js'
import {
  add, agreesWithModel, capacityOf, checkCharges, fmax, deterministic, fmin, floorOf, frac, le, recoveredIsFresh,
  moreIsExact, resetIsExact, retryIsLeast, roundTrips, run, scenarioArb, sub
} from './fixtures/harness.js'
import type { Frac, Model, Scenario } from './fixtures/harness.js'

// Reference model: a level of tokens as an exact rational, gaining limit / windowMs tokens per
// elapsed ms (whole ms only: the clock is integer), capped at burst. Time never runs backwards:
// the model keeps the furthest time seen, and an earlier call sees the level as it was then.
class TokenBucketModel implements Model {
  level: Frac
  clock: number
  constructor (readonly policy: Policy, t0: number) {
    this.level = frac(capacityOf(policy))
    this.clock = t0
  }

  private at (now: number): Frac {
    if (now <= this.clock) return this.level
    return fmin(frac(capacityOf(this.policy)), add(this.level, frac((now - this.clock) * this.policy.limit, this.policy.windowMs)))
  }

  consume (now: number, cost: number): { allowed: boolean, remaining: number } {
    this.level = this.at(now)
    this.clock = Math.max(this.clock, now)
    const allowed = le(frac(cost), this.level)
    if (allowed) this.level = sub(this.level, frac(cost))
    return { allowed, remaining: Math.max(0, floorOf(this.level)) }
  }

  // Down to one capacity below empty (a debt), up to capacity; a charge never raises the level.
  charge (now: number, units: number): { allowed: boolean, remaining: number } {
    const cap = frac(capacityOf(this.policy))
    const level = this.at(now)
    const moved = sub(level, frac(units))
    this.level = units > 0 ? fmin(level, fmax(sub(frac(0), cap), moved)) : fmin(cap, moved)
    this.clock = Math.max(this.clock, now)
    return { allowed: le(frac(1), this.level), remaining: Math.max(0, floorOf(this.level)) }
  }

  admits (now: number, cost: number): boolean {
    return le(frac(cost), this.at(now))
  }

  full (now: number): boolean {
    return le(frac(capacityOf(this.policy)), this.at(now))
  }
}

const smallSizes = { maxLimit: 12, maxWindow: 30, maxBurst: 10, maxOps: 20 }
const opts = { numRuns: 150 }

t.test('table', async (t) => {
  const p: Policy = { algorithm: 'token-bucket', limit: 2, windowMs: 10, burst: 3 }
  const s0 = tokenBucket.fresh(p, 1000)
  t.same(s0, { tokens: 30, last: 1000 }, 'capacity burst * windowMs units')
  const a = tokenBucket.consume(s0, p, 1000, 3)
  t.same(a, { allowed: true, remaining: 0, retryAfterMs: 0, resetAt: 1015, moreAt: 1005, state: { tokens: 0, last: 1000 } })
  const b = tokenBucket.consume(a.state, p, 1004, 1)
  // 4 ms * 2 units = 8 units: 0.8 token; 1 token (10 units) after 5 ms.
  t.same(b, { allowed: false, remaining: 0, retryAfterMs: 1, resetAt: 1015, moreAt: 1005, state: { tokens: 8, last: 1004 } })
  t.ok(tokenBucket.consume(b.state, p, 1005, 1).allowed)
  // A clock that steps back refills nothing until `last`, and the wait counts from now.
  const c = tokenBucket.consume(b.state, p, 990, 2)
  t.same(c, { allowed: false, remaining: 0, retryAfterMs: 14 + 6, resetAt: 1015, moreAt: 1005, state: { tokens: 8, last: 1004 } })
  t.equal(tokenBucket.recoversAt(s0, p), 1000)
  t.equal(tokenBucket.recoversAt({ tokens: 40, last: 7 }, p), 7, 'above capacity counts as full')
  // burst defaults to limit
  t.same(tokenBucket.fresh({ algorithm: 'token-bucket', limit: 5, windowMs: 1000 }, 0), { tokens: 5000, last: 0 })
})

t.test('runs on the core take: the state is take\'s bucket', async (t) => {
  fc.assert(fc.property(scenarioArb('token-bucket', smallSizes), (s: Scenario) => {
    const cap = capacityOf(s.policy) * s.policy.windowMs
    const config = { capacity: cap, refill: s.policy.limit, interval: 1 }
    let b = newBucket(cap, s.t0)
    for (const step of run(tokenBucket, s)) {
      const r = take(b, config, step.now, step.cost * s.policy.windowMs)
      assert.deepEqual(step.out.state, { tokens: r.tokens, last: r.last })
      assert.equal(step.out.allowed, r.ok)
      b = bucket(r.tokens, r.last)
    }
  }), opts)
  t.pass('holds')
})

t.test('(a) every decision field equals the reference model\'s', async (t) => {
  fc.assert(fc.property(scenarioArb('token-bucket', smallSizes), (s) => {
    agreesWithModel(tokenBucket, s, new TokenBucketModel(s.policy, s.t0))
  }), opts)
  t.pass('holds')
})

t.test('(b) admitted cost in any interval [a, b] <= burst + floor((b - a) * limit / windowMs)', async (t) => {
  fc.assert(fc.property(scenarioArb('token-bucket', { ...smallSizes, maxOps: 40 }), (s) => {
    const admitted = run(tokenBucket, s).filter((x) => x.out.allowed)
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

const realistic = { maxLimit: 1000, maxWindow: 3_600_000, maxBurst: 2000, maxOps: 30, maxStart: 4_000_000_000_000 }

t.test('(c) retryAfterMs is never early and least (small and realistic policies)', async (t) => {
  let denials = 0
  for (const sizes of [smallSizes, realistic]) {
    fc.assert(fc.property(scenarioArb('token-bucket', sizes), (s) => { denials += retryIsLeast(tokenBucket, s) }), opts)
  }
  t.ok(denials > 100, `${denials} denials checked`)
})

t.test('(d) resetAt is the first tick of full capacity', async (t) => {
  for (const sizes of [smallSizes, realistic]) {
    fc.assert(fc.property(scenarioArb('token-bucket', sizes), (s) => resetIsExact(tokenBucket, s)), opts)
  }
  t.pass('holds')
})

t.test("(d') moreAt is the first tick of one more unit (RateLimit's t)", async (t) => {
  let checked = 0
  for (const sizes of [smallSizes, realistic]) {
    fc.assert(fc.property(scenarioArb('token-bucket', sizes), (s) => { checked += moreIsExact(tokenBucket, s) }), opts)
  }
  t.ok(checked > 100, `${checked} outcomes below capacity checked`)
})

t.test('(e) deterministic, inputs untouched; (f) a recovered state is a fresh one; rows round-trip', async (t) => {
  fc.assert(fc.property(scenarioArb('token-bucket', smallSizes), fc.nat(40), fc.integer({ min: 1, max: 20 }), (s, extra, cost) => {
    deterministic(tokenBucket, s)
    recoveredIsFresh(tokenBucket, s, extra, cost)
    roundTrips(tokenBucket, s)
  }), opts)
  t.pass('holds')
})

t.test('charges: a debt below empty that time repays; every property holds with the model', async (t) => {
  const { denials, mores, charges } = checkCharges(tokenBucket, 'token-bucket', [smallSizes, { maxLimit: 1000, maxWindow: 3_600_000, maxBurst: 2000, maxOps: 30, maxStart: 4_102_444_800_000 }], (s) => new TokenBucketModel(s.policy, s.t0))
  t.ok(charges > 500 && denials > 100 && mores > 100, `${charges} charges, ${denials} refusals, ${mores} moreAt checked`)
})

t.test('charges: table', async (t) => {
  const p: Policy = { algorithm: 'token-bucket', limit: 2, windowMs: 10, burst: 3 }
  const s0 = tokenBucket.fresh(p, 1000)
  // 5 tokens from 3: 2 owed; a token back every 5 ms, so 1 token at 1000 + 15.
  const a = tokenBucket.charge(s0, p, 1000, 5)
  t.same(a, { allowed: false, remaining: 0, retryAfterMs: 15, resetAt: 1025, moreAt: 1015, state: { tokens: -20, last: 1000 } })
  t.same(tokenBucket.charge(a.state, p, 1000, 3).state, { tokens: -30, last: 1000 }, 'one capacity of debt at most')
  t.same(tokenBucket.charge(s0, p, 1000, -1).state, { tokens: 30, last: 1000 }, 'never above capacity')
  t.same(tokenBucket.charge(a.state, p, 1000, -1).state, { tokens: -10, last: 1000 })
})
