import t from 'tap'
import { policyHeader, rateLimitHeader } from '../../lib/gate/headers.js'
import { MemoryLimiter, ADMITTED, LIMITED } from '../../lib/backends/memory/memory-limiter.js'
import { kernelOf, type Algorithm, type Policy } from '../../lib/core/rates/index.js'

const ALGORITHMS: readonly Algorithm[] = ['token-bucket', 'fixed-window', 'sliding-window-counter', 'gcra']

const limiterFor = (policy: Policy): MemoryLimiter => new MemoryLimiter(kernelOf(policy.algorithm), policy, 10)

/** The `RateLimit` header after the limiter's last decision, made at `now`. */
const after = (limiter: MemoryLimiter, now: number): string => rateLimitHeader(limiter.remaining, limiter.resetAt, now)

t.test('RateLimit-Policy: quota and window in whole seconds, rounded up', async (t) => {
  t.equal(policyHeader({ algorithm: 'token-bucket', limit: 100, windowMs: 60_000, burst: 20 }), '"default";q=100;w=60')
  t.equal(policyHeader({ algorithm: 'token-bucket', limit: 1, windowMs: 1000, burst: 1 }), '"default";q=1;w=1')
  t.equal(policyHeader({ algorithm: 'token-bucket', limit: 5, windowMs: 1, burst: 5 }), '"default";q=5;w=1', '1 ms is 1 s')
  t.equal(policyHeader({ algorithm: 'token-bucket', limit: 5, windowMs: 1001, burst: 5 }), '"default";q=5;w=2')
  t.equal(policyHeader({ algorithm: 'token-bucket', limit: 5, windowMs: 1999, burst: 5 }), '"default";q=5;w=2')
  t.equal(policyHeader({ algorithm: 'token-bucket', limit: 7, windowMs: 86_400_000, burst: 1 }), '"default";q=7;w=86400')
  t.equal(policyHeader({ algorithm: 'token-bucket', limit: 7, windowMs: 1000 }), '"default";q=7;w=1', 'without a burst')
})

t.test('RateLimit-Policy: the same quota and window for every algorithm; burst does not show', async (t) => {
  for (const algorithm of ALGORITHMS) {
    t.equal(policyHeader({ algorithm, limit: 100, windowMs: 60_000 }), '"default";q=100;w=60', algorithm)
    t.equal(policyHeader({ algorithm, limit: 3, windowMs: 2500 }), '"default";q=3;w=3', `${algorithm}, rounded up`)
  }
  t.equal(policyHeader({ algorithm: 'gcra', limit: 100, windowMs: 60_000, burst: 5 }), '"default";q=100;w=60')
})

t.test('RateLimit: remaining and the seconds from now to resetAt, rounded up, never negative', async (t) => {
  t.equal(rateLimitHeader(19, 600, 0), '"default";r=19;t=1')
  t.equal(rateLimitHeader(0, 12_000, 0), '"default";r=0;t=12')
  t.equal(rateLimitHeader(0, 12_000, 599), '"default";r=0;t=12', '11 401 ms')
  t.equal(rateLimitHeader(0, 12_000, 1000), '"default";r=0;t=11', '11 000 ms exactly')
  t.equal(rateLimitHeader(0, 12_000, 1001), '"default";r=0;t=11')
  t.equal(rateLimitHeader(0, 12_000, 11_999), '"default";r=0;t=1', '1 ms is 1 s')
  t.equal(rateLimitHeader(5, 12_000, 12_000), '"default";r=5;t=0', 'full now')
  t.equal(rateLimitHeader(5, 12_000, 13_000), '"default";r=5;t=0', 'full since a while: not negative')
  // Epoch ticks: only the difference counts.
  const epoch = 1_767_225_600_000
  t.equal(rateLimitHeader(3, epoch + 2500, epoch), '"default";r=3;t=3')
  t.equal(rateLimitHeader(3, epoch + 86_400_000, epoch + 1), '"default";r=3;t=86400')
})

t.test('RateLimit after token-bucket decisions: remaining requests and seconds until full', async (t) => {
  const limiter = limiterFor({ algorithm: 'token-bucket', limit: 100, windowMs: 60_000, burst: 20 })
  t.equal(limiter.consume('a', 0, 1), ADMITTED)
  // 19 left; 600 ms until the spent token is back.
  t.equal(after(limiter, 0), '"default";r=19;t=1')
  for (let i = 0; i < 19; i++) limiter.consume('a', 0, 1)
  // Empty: 20 × 600 ms = 12 s until full.
  t.equal(after(limiter, 0), '"default";r=0;t=12')
  t.equal(limiter.consume('a', 0, 1), LIMITED)
  t.equal(after(limiter, 0), '"default";r=0;t=12')
  t.equal(limiter.consume('a', 599, 1), LIMITED)
  // 599 ms refilled 0.998 of a token: still none whole, 11 401 ms to full.
  t.equal(after(limiter, 599), '"default";r=0;t=12')
  t.equal(limiter.consume('a', 1200, 1), ADMITTED)
  // Two tokens refilled since the bucket was empty, one spent: one left, 19 × 600 = 11 400 ms to full.
  t.equal(after(limiter, 1200), '"default";r=1;t=12')
  t.equal(limiter.resetAt, 12_600)
  t.equal(limiter.consume('fresh', 1200, 1), ADMITTED)
  t.equal(after(limiter, 1200), '"default";r=19;t=1', 'the header follows the last decision')
  t.equal(limiter.consume('a', 100_000, 1), ADMITTED)
  t.equal(after(limiter, 100_000), '"default";r=19;t=1')
})

t.test('RateLimit after token-bucket decisions: t is 0 only for a full bucket', async (t) => {
  // 1000 per second: one token per millisecond; a cost-1 take is back after 1 ms.
  const limiter = limiterFor({ algorithm: 'token-bucket', limit: 1000, windowMs: 1000, burst: 1000 })
  limiter.consume('a', 0, 1)
  t.equal(limiter.resetAt, 1)
  t.equal(after(limiter, 0), '"default";r=999;t=1')
  const whole = limiterFor({ algorithm: 'token-bucket', limit: 1, windowMs: 1000, burst: 3 })
  whole.consume('a', 0, 3)
  t.equal(after(whole, 0), '"default";r=0;t=3')
  whole.consume('a', 2000, 1)
  t.equal(after(whole, 2000), '"default";r=1;t=2', 'two refilled, one spent: 2 s to full')
  whole.consume('a', 2001, 1)
  t.equal(after(whole, 2001), '"default";r=0;t=3', '2999 ms rounds up to 3 s')
  whole.consume('a', 5000, 1)
  t.equal(after(whole, 5000), '"default";r=2;t=1', 'full again by 5000, one spent')
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

  // Sliding window counter of 10 s: the count slides out two windows after its own.
  const sliding = limiterFor({ algorithm: 'sliding-window-counter', limit: 10, windowMs: 10_000 })
  sliding.consume('a', 2000, 4)
  t.equal(after(sliding, 2000), '"default";r=6;t=18', 'until 20 000')
  sliding.consume('a', 15_000, 1)
  // Previous 4 weighs 4 × 5/10 = 2; current 1: 10 - 2 - 1 = 7; until 30 000.
  t.equal(after(sliding, 15_000), '"default";r=7;t=15')

  // GCRA, 2 per second with burst 4: the TAT, 500 ms per unit.
  const gcra = limiterFor({ algorithm: 'gcra', limit: 2, windowMs: 1000, burst: 4 })
  gcra.consume('a', 1000, 3)
  t.equal(after(gcra, 1000), '"default";r=1;t=2', 'full at 2500')
  t.equal(gcra.consume('a', 1000, 2), LIMITED)
  t.equal(after(gcra, 1000), '"default";r=1;t=2')
  gcra.consume('a', 3000, 1)
  t.equal(after(gcra, 3000), '"default";r=3;t=1', 'full again since 2500, one spent')
})
