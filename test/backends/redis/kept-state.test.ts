// The rule behind the decision script's `kept` (decide-script.ts): a refusal takes nothing, so the
// state it leaves differs from the stored one only by its clock brought forward to now, and a
// later decision on the stored state comes out the same. The script then keeps the stored state
// instead of writing the one after the refusal. Checked on the TypeScript kernels (the script's
// twins, held to them by the differential tests): after any history, a refusal at t, and any
// decision or charge at t' >= t on either state decides every field alike, leaves the same state
// and the same recovery. No Redis needed.
import assert from 'node:assert/strict'
import t from 'tap'
import fc from 'fast-check'
import { kernelFor, type Algorithm, type Policy } from '../../../lib/core/rates/index.js'
import { capacityOf, normalizePolicy } from '../../../lib/rates/policy.js'
import { keptByScript } from './helpers.js'

const ALGORITHMS: Algorithm[] = ['token-bucket', 'fixed-window', 'sliding-window-counter', 'gcra']

function policyArb (algorithm: Algorithm): fc.Arbitrary<Readonly<Policy>> {
  const limit = fc.oneof(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 30 }))
  const windowMs = fc.oneof(fc.integer({ min: 1, max: 10 }), fc.integer({ min: 1, max: 2_000 }), fc.constantFrom(1_000, 60_000, 3_600_000))
  const burst = fc.option(fc.integer({ min: 1, max: 40 }), { nil: undefined })
  const penalty = fc.constantFrom<unknown>(undefined, undefined, 'restart', 'double')
  return fc.record({ limit, windowMs, burst, penalty }).map(({ limit, windowMs, burst, penalty }) => {
    const base = (algorithm === 'token-bucket' || algorithm === 'gcra') && burst !== undefined ? { algorithm, limit, windowMs, burst } : { algorithm, limit, windowMs }
    return normalizePolicy(penalty === undefined ? base : { ...base, penalty })
  })
}

interface Step { dt: number, cost: number, units: number | undefined }

const stepArb = (W: number, cap: number): fc.Arbitrary<Step> => fc.record({
  dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: Math.max(1, Math.ceil(W / 2)) }), fc.integer({ min: 0, max: 3 * W })),
  cost: fc.integer({ min: 1, max: cap }),
  units: fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.integer({ min: -cap, max: cap }) })
})

for (const algorithm of ALGORITHMS) {
  t.test(`${algorithm}: a later decision on the state a refusal kept is the one on the state after it`, async (t) => {
    let compared = 0
    fc.assert(fc.property(policyArb(algorithm).chain((policy) => fc.record({
      policy: fc.constant(policy),
      t0: fc.oneof(fc.integer({ min: 0, max: 1_000_000 }), fc.integer({ min: 1_800_000_000_000, max: 1_801_000_000_000 })),
      history: fc.array(stepArb(policy.windowMs, capacityOf(policy)), { maxLength: 10 }),
      later: fc.array(stepArb(policy.windowMs, capacityOf(policy)), { minLength: 1, maxLength: 4 })
    })), ({ policy, t0, history, later }) => {
      const kernel = kernelFor(policy)
      let state = kernel.fresh(policy, t0)
      let now = t0
      for (const { dt, cost, units } of history) {
        now += dt
        const out = units === undefined ? kernel.consume(state, policy, now, cost) : kernel.charge(state, policy, now, units)
        if (!keptByScript(policy, kernel, state, out, units !== undefined)) state = out.state
      }
      // A refusal now: the largest cost, refused unless the state is full.
      const refused = kernel.consume(state, policy, now, capacityOf(policy))
      if (!keptByScript(policy, kernel, state, refused, false)) return
      let kept = state
      let after = refused.state
      let at = now
      for (const { dt, cost, units } of later) {
        at += dt
        const a = units === undefined ? kernel.consume(kept, policy, at, cost) : kernel.charge(kept, policy, at, units)
        const b = units === undefined ? kernel.consume(after, policy, at, cost) : kernel.charge(after, policy, at, units)
        assert.deepEqual({ ...a, state: null }, { ...b, state: null }, `at ${at}: ${units === undefined ? `cost ${cost}` : `charge ${units}`}`)
        assert.deepEqual(a.state, b.state, `the state after at ${at}`)
        compared++
        kept = keptByScript(policy, kernel, kept, a, units !== undefined) ? kept : a.state
        after = keptByScript(policy, kernel, after, b, units !== undefined) ? after : b.state
      }
      assert.equal(kernel.recoversAt(kept, policy) > now ? kernel.recoversAt(kept, policy) : now, kernel.recoversAt(after, policy) > now ? kernel.recoversAt(after, policy) : now, 'the same recovery, once past the refusal')
    }), { numRuns: 500 })
    t.ok(compared > 200, `${compared} later decisions alike`)
  })
}
