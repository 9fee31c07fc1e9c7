// Each algorithm through the real plugin with an injected clock, against the decision's own promises:
// - retryAfterMs is never early: wait it (advance the clock), retry the same cost → allowed;
// - and it is the least wait: one millisecond sooner the same cost is still denied;
// - remaining: exactly that many cost-1 consumes pass right now, and the next one is denied;
// - resetAt: full capacity then (a consume of the whole capacity passes), not a millisecond before;
// - moreAt: more than remaining then (a consume of remaining + 1 passes), not a millisecond before.
import t from 'tap'
import fc from 'fast-check'
import Fastify from 'fastify'
import admission, { memoryBackend, type RateDecision, type RateLimiter, type RatePolicy } from '../../lib/index.js'
import type { Algorithm } from '../../lib/core/rates/types.js'

const ALGORITHMS: readonly Algorithm[] = ['token-bucket', 'fixed-window', 'sliding-window-counter', 'gcra']
const RUNS = Number(process.env.RATES_PROPERTY_RUNS ?? 300)

function capacityOf (policy: RatePolicy): number {
  return policy.algorithm === 'token-bucket' || policy.algorithm === 'gcra' ? policy.burst ?? policy.limit : policy.limit
}

function policyArb (algorithm: Algorithm): fc.Arbitrary<RatePolicy> {
  const base = {
    limit: fc.oneof(fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 150 })),
    windowMs: fc.oneof(fc.integer({ min: 1, max: 50 }), fc.integer({ min: 1, max: 5000 }), fc.integer({ min: 1, max: 86_400_000 }))
  }
  if (algorithm === 'token-bucket' || algorithm === 'gcra') {
    return fc.record({ ...base, burst: fc.option(fc.oneof(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: 300 })), { nil: undefined }) })
      .map(({ limit, windowMs, burst }) => burst === undefined ? { algorithm, limit, windowMs } : { algorithm, limit, windowMs, burst })
  }
  return fc.record(base).map(({ limit, windowMs }) => ({ algorithm, limit, windowMs }))
}

type Check = 'none' | 'retry' | 'retry-early' | 'remaining' | 'reset' | 'more'
/** `dt`: ms, or (`inWindows`) a multiple of the policy's window. */
interface Step { dt: number, inWindows: boolean, share: number, check: Check }

const stepArb: fc.Arbitrary<Step> = fc.record({
  dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 100 }), fc.double({ min: 0, max: 2.5, noNaN: true })),
  inWindows: fc.boolean(),
  share: fc.double({ min: 0, max: 1, noNaN: true }),
  check: fc.constantFrom<Check>('none', 'retry', 'retry', 'retry-early', 'retry-early', 'remaining', 'reset', 'more')
})

class Failure extends Error {}

function expectShape (d: RateDecision, now: number, capacity: number, where: string): void {
  const keys = Object.keys(d).join(',')
  if (d.allowed) {
    if (d.denied !== false || keys !== 'allowed,denied,remaining,resetAt,moreAt') throw new Failure(`${where}: allow shape ${JSON.stringify(d)}`)
  } else {
    if (d.denied !== true || keys !== 'allowed,denied,remaining,retryAfterMs,resetAt,moreAt') throw new Failure(`${where}: deny shape ${JSON.stringify(d)}`)
    if (!Number.isSafeInteger(d.retryAfterMs) || d.retryAfterMs < 1) throw new Failure(`${where}: retryAfterMs ${d.retryAfterMs}`)
  }
  if (!Number.isSafeInteger(d.remaining) || d.remaining < 0 || d.remaining > capacity) throw new Failure(`${where}: remaining ${d.remaining}`)
  if (!Number.isSafeInteger(d.resetAt) || d.resetAt <= now) throw new Failure(`${where}: resetAt ${d.resetAt} at ${now} (a decision leaves the quota short of full)`)
  // Short of full, so more comes later; never after full capacity, nor after a refused cost passes.
  const moreAt = d.moreAt!
  if (!Number.isSafeInteger(moreAt) || moreAt <= now || moreAt > d.resetAt) throw new Failure(`${where}: moreAt ${moreAt} at ${now}, resetAt ${d.resetAt}`)
  if (d.denied && moreAt > now + d.retryAfterMs) throw new Failure(`${where}: moreAt ${moreAt} after the wait ${d.retryAfterMs}`)
}

for (const algorithm of ALGORITHMS) {
  t.test(`${algorithm}: retryAfterMs is exact and never early; remaining and resetAt keep their word`, async (t) => {
    const clock = { now: 0 }
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(admission, { backend: memoryBackend({ clock: () => clock.now }), rateLimit: false })
    let run = 0
    const seen = { denied: 0, retries: 0, early: 0, remaining: 0, reset: 0, more: 0 }

    await fc.assert(fc.asyncProperty(
      policyArb(algorithm),
      fc.integer({ min: 0, max: 2_000_000_000_000 }),
      fc.array(stepArb, { minLength: 1, maxLength: 30 }),
      async (policy, start, steps) => {
        // A fresh quota per run: a new name (same scope, other policy is a conflict) and identity.
        run++
        const l: RateLimiter = app.rates.use(`run-${run}`, policy)
        const identity = { run, algorithm }
        const capacity = capacityOf(policy)
        clock.now = start
        const consume = async (cost: number, where: string): Promise<RateDecision> => {
          const d = await l.consume(identity, { cost })
          expectShape(d, clock.now, capacity, `${where} at ${clock.now} cost ${cost}`)
          return d
        }
        for (const [i, step] of steps.entries()) {
          clock.now += step.inWindows ? Math.floor(step.dt * policy.windowMs) : Math.floor(step.dt)
          const cost = Math.min(capacity, 1 + Math.floor(step.share * capacity))
          const d = await consume(cost, `step ${i}`)
          if (d.denied) {
            seen.denied++
            if (d.remaining >= cost) throw new Failure(`step ${i}: denied cost ${cost} with remaining ${d.remaining}`)
            if (step.check === 'retry-early' && d.retryAfterMs > 1) {
              seen.early++
              clock.now += d.retryAfterMs - 1
              const early = await consume(cost, `step ${i}, 1 ms early`)
              if (!early.denied) throw new Failure(`step ${i}: allowed 1 ms before retryAfterMs ${d.retryAfterMs}`)
              if (early.retryAfterMs !== 1) throw new Failure(`step ${i}: 1 ms early, retryAfterMs ${early.retryAfterMs}`)
              clock.now += 1
            } else if (step.check === 'retry' || step.check === 'retry-early') {
              clock.now += d.retryAfterMs
            } else {
              continue
            }
            seen.retries++
            const again = await consume(cost, `step ${i}, retried after ${d.retryAfterMs} ms`)
            if (!again.allowed) throw new Failure(`step ${i}: retry after ${d.retryAfterMs} ms was early: ${JSON.stringify(again)}`)
          } else if (step.check === 'remaining') {
            seen.remaining++
            for (let k = 0; k < d.remaining; k++) {
              const next = await consume(1, `step ${i}, unit ${k + 1} of remaining ${d.remaining}`)
              if (!next.allowed) throw new Failure(`step ${i}: unit ${k + 1} of remaining ${d.remaining} denied`)
            }
            const over = await consume(1, `step ${i}, past remaining ${d.remaining}`)
            if (!over.denied) throw new Failure(`step ${i}: remaining ${d.remaining} was short: one more passed`)
          } else if (step.check === 'reset') {
            seen.reset++
            clock.now = d.resetAt - 1
            const before = await consume(capacity, `step ${i}, 1 ms before resetAt`)
            if (!before.denied) throw new Failure(`step ${i}: full capacity 1 ms before resetAt ${d.resetAt}`)
            clock.now = d.resetAt
            const full = await consume(capacity, `step ${i}, at resetAt`)
            if (!full.allowed || full.remaining !== 0) throw new Failure(`step ${i}: not full at resetAt ${d.resetAt}: ${JSON.stringify(full)}`)
          } else if (step.check === 'more') {
            seen.more++
            const more = d.remaining + 1
            clock.now = d.moreAt! - 1
            const before = await consume(more, `step ${i}, 1 ms before moreAt`)
            if (!before.denied) throw new Failure(`step ${i}: ${more} units 1 ms before moreAt ${d.moreAt}`)
            clock.now = d.moreAt!
            const after = await consume(more, `step ${i}, at moreAt`)
            if (!after.allowed) throw new Failure(`step ${i}: not ${more} units at moreAt ${d.moreAt}: ${JSON.stringify(after)}`)
          }
        }
      }
    ), { numRuns: RUNS })
    t.ok(seen.denied > 0 && seen.retries > 0 && seen.early > 0 && seen.remaining > 0 && seen.reset > 0 && seen.more > 0, `every check ran: ${JSON.stringify(seen)}`)
  })
}
