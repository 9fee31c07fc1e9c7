// Property: for every algorithm, burst, cost and penalty, the fields a decision is sent with parse
// back (RFC 9651, an independent parser) to numbers a client can plan from: r <= q; t never early
// (one more unit than r passes t seconds later, nothing else consumed) and absent only at full
// capacity; on a refusal Retry-After >= t, and the same cost passes at Retry-After.
import t from 'tap'
import fc from 'fast-check'
import { parseItem, parseList } from 'structured-headers'
import { kernelFor, type Policy } from '../../lib/core/rates/index.js'
import { capacityOf, normalizePolicy } from '../../lib/rates/policy.js'
import { policyHeader, quotaOf, rateLimitHeader, rateLimitStart } from '../../lib/gate/headers/rate-limit-fields.js'
import { retrySeconds } from '../../lib/gate/outcomes/refusal-text.js'

const policyArb: fc.Arbitrary<Policy> = fc.record({
  algorithm: fc.constantFrom('token-bucket' as const, 'fixed-window' as const, 'sliding-window-counter' as const, 'gcra' as const),
  limit: fc.integer({ min: 1, max: 30 }),
  windowMs: fc.integer({ min: 1, max: 120_000 }),
  extraBurst: fc.integer({ min: 0, max: 20 }),
  penalty: fc.constantFrom(undefined, 'restart' as const, 'double' as const)
}).map(({ algorithm, limit, windowMs, extraBurst, penalty }) => normalizePolicy({
  algorithm,
  limit,
  windowMs,
  ...(algorithm === 'token-bucket' || algorithm === 'gcra' ? { burst: limit + extraBurst } : {}),
  ...(penalty === undefined ? {} : { penalty })
}))

t.test('every header a decision is sent with parses back to what was meant, and never tells a client to come early', async (t) => {
  let refusals = 0
  let timed = 0
  fc.assert(fc.property(policyArb, fc.array(fc.tuple(fc.integer({ min: 0, max: 20_000 }), fc.integer({ min: 1, max: 50 })), { minLength: 1, maxLength: 30 }), fc.nat({ max: 2e12 }), fc.constantFrom('default', 'per-minute', 'a.b_c-1'), (policy, steps, t0, name) => {
    const kernel = kernelFor(policy)
    const q = capacityOf(policy)
    const cost = Math.min(steps[0]![1], q)
    const start = rateLimitStart(name)
    const [item] = parseList(policyHeader(policy, [name], cost))
    if (item![0] !== name || item![1].get('q') !== quotaOf(policy).quota || item![1].get('w') !== quotaOf(policy).windowSeconds) return false
    if ((cost === 1) !== !item![1].has('admission-cost')) return false
    let now = t0
    let state = kernel.fresh(policy, now)
    for (const [dt] of steps) {
      now += dt
      const out = kernel.consume(state, policy, now, cost)
      const retry = out.allowed ? undefined : retrySeconds(out.retryAfterMs)
      const [bare, params] = parseItem(rateLimitHeader(out.remaining, q, out.moreAt, now, start, retry))
      const r = params.get('r') as number
      const sent = params.get('t') as number | undefined
      if (bare !== name || r > q || r < 0 || r !== Math.min(out.remaining, q)) return false
      if (sent === undefined) {
        if (r !== q) return false
      } else {
        timed++
        // Never early: r + 1 units pass t seconds on (the unit that comes first is there by then).
        if (!kernel.consume(out.state, policy, now + sent * 1000, r + 1).allowed) return false
      }
      if (retry !== undefined) {
        refusals++
        if (sent !== undefined && retry < sent) return false
        if (!kernel.consume(out.state, policy, now + retry * 1000, cost).allowed) return false
      }
      state = out.state
    }
    return true
  }), { numRuns: 3000 })
  t.ok(refusals > 500 && timed > 1000, `${refusals} refusals, ${timed} headers with t`)
})
