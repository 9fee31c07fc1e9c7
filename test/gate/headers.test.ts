import t from 'tap'
import { policyHeader, rateLimitHeader, rateLimitList, rateLimitStart } from '../../lib/gate/headers/rate-limit-fields.js'
import { MemoryLimiter, ADMITTED, LIMITED } from '../../lib/backends/memory/memory-limiter.js'
import fc from 'fast-check'
import { kernelOf, type Algorithm, type Policy } from '../../lib/core/rates/index.js'
import { capacityOf } from '../../lib/rates/policy.js'

const ALGORITHMS: readonly Algorithm[] = ['token-bucket', 'fixed-window', 'sliding-window-counter', 'gcra']

const limiterFor = (policy: Policy): MemoryLimiter => new MemoryLimiter(kernelOf(policy.algorithm), policy, 10)

/** The `RateLimit` header after the limiter's last decision, made at `now`: t from its moreAt. */
const after = (limiter: MemoryLimiter, now: number): string => rateLimitHeader(limiter.remaining, capacityOf(limiter.policy), limiter.moreAt, now)

t.test('RateLimit-Policy: q is the capacity, w the whole seconds it takes to come back, rounded up', async (t) => {
  // token-bucket: burst at limit per window.
  t.equal(policyHeader({ algorithm: 'token-bucket', limit: 100, windowMs: 60_000, burst: 20 }), '"default";q=20;w=12', '20 at 100/min: 12 s')
  t.equal(policyHeader({ algorithm: 'token-bucket', limit: 100, windowMs: 60_000, burst: 100 }), '"default";q=100;w=60')
  t.equal(policyHeader({ algorithm: 'token-bucket', limit: 2, windowMs: 1000, burst: 3 }), '"default";q=3;w=2', 'burst above limit: 1.5 s rounds up')
  t.equal(policyHeader({ algorithm: 'token-bucket', limit: 1, windowMs: 1000, burst: 1 }), '"default";q=1;w=1')
  t.equal(policyHeader({ algorithm: 'token-bucket', limit: 5, windowMs: 1, burst: 5 }), '"default";q=5;w=1', '1 ms is 1 s')
  t.equal(policyHeader({ algorithm: 'token-bucket', limit: 5, windowMs: 1001, burst: 5 }), '"default";q=5;w=2')
  t.equal(policyHeader({ algorithm: 'token-bucket', limit: 7, windowMs: 86_400_000, burst: 1 }), '"default";q=1;w=12343', 'ceil(86 400 000 / 7) ms')
  t.equal(policyHeader({ algorithm: 'token-bucket', limit: 7, windowMs: 1000 }), '"default";q=7;w=1', 'without a burst')
  t.equal(policyHeader({ algorithm: 'gcra', limit: 100, windowMs: 60_000, burst: 5 }), '"default";q=5;w=3')
  t.equal(policyHeader({ algorithm: 'gcra', limit: 2, windowMs: 1000, burst: 4 }), '"default";q=4;w=2')
  // The window algorithms: limit per window.
  for (const algorithm of ['fixed-window', 'sliding-window-counter'] as const) {
    t.equal(policyHeader({ algorithm, limit: 100, windowMs: 60_000 }), '"default";q=100;w=60', algorithm)
    t.equal(policyHeader({ algorithm, limit: 3, windowMs: 2500 }), '"default";q=3;w=3', `${algorithm}, rounded up`)
  }
})

t.test('RateLimit: remaining (clamped to 0..q) and the seconds from now to moreAt, rounded up, never negative; no t at r = q', async (t) => {
  t.equal(rateLimitHeader(19, 20, 600, 0), '"default";r=19;t=1')
  // Beyond a Structured Field Integer (a quota of more than 999,999,999,999,999): the serializer's error.
  t.throws(() => rateLimitHeader(1e15, 1e15, 0, 0), { code: 'ADMISSION_SF_INVALID_INTEGER' })
  t.equal(rateLimitHeader(0, 20, 12_000, 0), '"default";r=0;t=12')
  t.equal(rateLimitHeader(0, 20, 12_000, 599), '"default";r=0;t=12', '11 401 ms')
  t.equal(rateLimitHeader(0, 20, 12_000, 1000), '"default";r=0;t=11', '11 000 ms exactly')
  t.equal(rateLimitHeader(0, 20, 12_000, 1001), '"default";r=0;t=11')
  t.equal(rateLimitHeader(0, 20, 12_000, 11_999), '"default";r=0;t=1', '1 ms is 1 s')
  t.equal(rateLimitHeader(5, 20, 12_000, 12_000), '"default";r=5;t=0', 'more now')
  t.equal(rateLimitHeader(5, 20, 12_000, 13_000), '"default";r=5;t=0', 'more since a while: not negative')
  t.equal(rateLimitHeader(20, 20, 12_000, 0), '"default";r=20', 'full capacity: no t, nothing more comes (whatever moreAt says)')
  t.equal(rateLimitHeader(50, 20, 0, 0), '"default";r=20', 'a backend reporting more than q: r is q, and full')
  t.equal(rateLimitHeader(-3, 20, 0, 0), '"default";r=0;t=0', 'or less than none: 0')
  t.equal(rateLimitHeader(19, 20, 5000, 0, rateLimitStart('tier')), '"tier";r=19;t=5', 'another name')
  // A refusal's Retry-After (whole seconds) caps t; a t within it stays.
  t.equal(rateLimitHeader(0, 20, 12_000, 0, undefined, 3), '"default";r=0;t=3', 'capped at Retry-After')
  t.equal(rateLimitHeader(0, 20, 2000, 0, undefined, 3), '"default";r=0;t=2', 'below Retry-After: unchanged')
  t.equal(rateLimitHeader(20, 20, 12_000, 0, undefined, 3), '"default";r=20', 'full: still no t')
  // Epoch ticks: only the difference counts.
  const epoch = 1_767_225_600_000
  t.equal(rateLimitHeader(3, 20, epoch + 2500, epoch), '"default";r=3;t=3')
  t.equal(rateLimitHeader(3, 20, epoch + 86_400_000, epoch + 1), '"default";r=3;t=86400')
})

t.test('property: r never exceeds q, for every algorithm and burst, after any decisions', async (t) => {
  fc.assert(fc.property(
    fc.constantFrom(...ALGORITHMS), fc.integer({ min: 1, max: 50 }), fc.integer({ min: 1, max: 100_000 }), fc.integer({ min: 1, max: 200 }),
    fc.array(fc.tuple(fc.integer({ min: 0, max: 5000 }), fc.integer({ min: 1, max: 50 })), { minLength: 1, maxLength: 30 }),
    (algorithm, limit, windowMs, burst, steps) => {
      const policy: Policy = algorithm === 'token-bucket' || algorithm === 'gcra' ? { algorithm, limit, windowMs, burst } : { algorithm, limit, windowMs }
      const limiter = limiterFor(policy)
      const q = Number(/q=(\d+)/.exec(policyHeader(policy))![1])
      let now = 0
      for (const [dt, cost] of steps) {
        now += dt
        limiter.consume('a', now, Math.min(cost, capacityOf(policy)))
        const r = Number(/r=(\d+)/.exec(after(limiter, now))![1])
        if (r > q) return false
      }
      return true
    }), { numRuns: 300 })
  t.pass('300 random policies and decision series')
})

t.test('RateLimit after token-bucket decisions: remaining requests and seconds until the next token (not until full)', async (t) => {
  const limiter = limiterFor({ algorithm: 'token-bucket', limit: 100, windowMs: 60_000, burst: 20 })
  t.equal(limiter.consume('a', 0, 1), ADMITTED)
  // 19 left; 600 ms until the spent token is back.
  t.equal(after(limiter, 0), '"default";r=19;t=1')
  for (let i = 0; i < 19; i++) limiter.consume('a', 0, 1)
  // Empty: 12 s until full, but the next token comes in 600 ms.
  t.equal(after(limiter, 0), '"default";r=0;t=1')
  t.equal(limiter.resetAt, 12_000)
  t.equal(limiter.moreAt, 600)
  t.equal(limiter.consume('a', 0, 1), LIMITED)
  t.equal(after(limiter, 0), '"default";r=0;t=1')
  t.equal(limiter.consume('a', 599, 1), LIMITED)
  // 599 ms refilled 0.998 of a token: still none whole, the first in 1 ms (11 401 ms to full).
  t.equal(after(limiter, 599), '"default";r=0;t=1')
  t.equal(limiter.moreAt, 600)
  t.equal(limiter.consume('a', 1200, 1), ADMITTED)
  // Two tokens refilled since the bucket was empty, one spent: one left, the second at 1800
  // (19 × 600 = 11 400 ms to full).
  t.equal(after(limiter, 1200), '"default";r=1;t=1')
  t.equal(limiter.resetAt, 12_600)
  t.equal(limiter.moreAt, 1800)
  t.equal(limiter.consume('fresh', 1200, 1), ADMITTED)
  t.equal(after(limiter, 1200), '"default";r=19;t=1', 'the header follows the last decision')
  t.equal(limiter.consume('a', 100_000, 1), ADMITTED)
  t.equal(after(limiter, 100_000), '"default";r=19;t=1')
})

t.test('RateLimit after token-bucket decisions: t rounds up, never 0 below full; a full bucket has no t', async (t) => {
  // 1000 per second: one token per millisecond; a cost-1 take is back after 1 ms.
  const limiter = limiterFor({ algorithm: 'token-bucket', limit: 1000, windowMs: 1000, burst: 1000 })
  limiter.consume('a', 0, 1)
  t.equal(limiter.resetAt, 1)
  t.equal(limiter.moreAt, 1)
  t.equal(after(limiter, 0), '"default";r=999;t=1')
  const whole = limiterFor({ algorithm: 'token-bucket', limit: 1, windowMs: 1000, burst: 3 })
  t.equal(whole.consume('b', 0, 0), ADMITTED)
  t.equal(after(whole, 0), '"default";r=3', 'full: no t')
  whole.consume('a', 0, 3)
  t.equal(after(whole, 0), '"default";r=0;t=1', 'empty: the next token in 1 s (3 s to full)')
  whole.consume('a', 2000, 1)
  t.equal(after(whole, 2000), '"default";r=1;t=1', 'two refilled, one spent: the second in 1 s (2 s to full)')
  whole.consume('a', 2001, 1)
  t.equal(after(whole, 2001), '"default";r=0;t=1', '0.001 left: 999 ms to the next token rounds up to 1 s')
  t.equal(whole.moreAt, 3000)
  whole.consume('a', 5000, 1)
  t.equal(after(whole, 5000), '"default";r=2;t=1', 'full again by 5000, one spent: back in 1 s')
})

t.test('RateLimit after decisions of the other algorithms', async (t) => {
  // Fixed window of 10 s: full again when the window ends.
  const fixed = limiterFor({ algorithm: 'fixed-window', limit: 5, windowMs: 10_000 })
  fixed.consume('a', 12_345, 2)
  t.equal(after(fixed, 12_345), '"default";r=3;t=8', '3 left until 20 000: 7 655 ms')
  fixed.consume('a', 19_999, 3)
  t.equal(after(fixed, 19_999), '"default";r=0;t=1')
  t.equal(fixed.consume('a', 19_999, 1), LIMITED)
  t.equal(after(fixed, 19_999), '"default";r=0;t=1')
  fixed.consume('a', 20_000, 1)
  t.equal(after(fixed, 20_000), '"default";r=4;t=10', 'a new window')

  // Sliding window counter of 10 s: the count slides out two windows after its own (full again
  // then), but one more unit comes as soon as the estimate has room for remaining + 1.
  const sliding = limiterFor({ algorithm: 'sliding-window-counter', limit: 10, windowMs: 10_000 })
  sliding.consume('a', 2000, 4)
  // 7 more need the previous 4 to weigh 3 at most: 4 × (10 000 - e) / 10 000 <= 3 at e = 2500
  // of the next window, 12 500 (full at 20 000).
  t.equal(after(sliding, 2000), '"default";r=6;t=11', 'until 12 500')
  t.equal(sliding.moreAt, 12_500)
  t.equal(sliding.resetAt, 20_000)
  sliding.consume('a', 15_000, 1)
  // Previous 4 weighs 4 × 5/10 = 2; current 1: 10 - 2 - 1 = 7. 8 more once the previous weighs
  // 1: 4 × (10 000 - e) / 10 000 <= 1 at e = 7500, 17 500 (full at 30 000).
  t.equal(after(sliding, 15_000), '"default";r=7;t=3')
  t.equal(sliding.moreAt, 17_500)

  // GCRA, 2 per second with burst 4: the TAT, 500 ms per unit.
  const gcra = limiterFor({ algorithm: 'gcra', limit: 2, windowMs: 1000, burst: 4 })
  gcra.consume('a', 1000, 3)
  t.equal(after(gcra, 1000), '"default";r=1;t=1', 'full at 2500, the second unit at 1500')
  t.equal(gcra.moreAt, 1500)
  t.equal(gcra.consume('a', 1000, 2), LIMITED)
  t.equal(after(gcra, 1000), '"default";r=1;t=1', 'a refusal: the same')
  gcra.consume('a', 3000, 1)
  t.equal(after(gcra, 3000), '"default";r=3;t=1', 'full again since 2500, one spent: back at 3500')
  t.equal(gcra.moreAt, 3500)
})

t.test('RateLimit of a stack: one item per policy; Retry-After caps t only for the policies that refused', async (t) => {
  const starts = [rateLimitStart('minute'), rateLimitStart('day')]
  const quotas = [10, 100]
  t.equal(rateLimitList(starts, quotas, [9, 100], [6000, 0], 0), '"minute";r=9;t=6, "day";r=100', 'the full one has no t')
  t.equal(rateLimitList(starts, quotas, [0, 40], [30_000, 50_000], 0, [true, false], 4), '"minute";r=0;t=4, "day";r=40;t=50', 'the refusing policy within Retry-After, the other not')
  t.equal(rateLimitList(starts, quotas, [0, 40], [30_000, 50_000], 0, [false, true], 4), '"minute";r=0;t=30, "day";r=40;t=4')
  t.equal(rateLimitList(starts, quotas, [0, 0], [2000, 50_000], 0, [true, true], 4), '"minute";r=0;t=2, "day";r=0;t=4', 'a t within it stays')
})
