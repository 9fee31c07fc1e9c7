import t from 'tap'
import { policyHeader, rateLimitHeader } from '../lib/headers.js'
import { TokenBucketLimiter, ADMITTED, LIMITED } from '../lib/token-bucket.js'
import type { RatePolicy } from '../lib/options.js'

t.test('RateLimit-Policy: quota and window in whole seconds, rounded up', async (t) => {
  t.equal(policyHeader({ limit: 100, windowMs: 60_000, burst: 20 }), '"default";q=100;w=60')
  t.equal(policyHeader({ limit: 1, windowMs: 1000, burst: 1 }), '"default";q=1;w=1')
  t.equal(policyHeader({ limit: 5, windowMs: 1, burst: 5 }), '"default";q=5;w=1', '1 ms is 1 s')
  t.equal(policyHeader({ limit: 5, windowMs: 1001, burst: 5 }), '"default";q=5;w=2')
  t.equal(policyHeader({ limit: 5, windowMs: 1999, burst: 5 }), '"default";q=5;w=2')
  t.equal(policyHeader({ limit: 7, windowMs: 86_400_000, burst: 1 }), '"default";q=7;w=86400')
})

t.test('RateLimit: remaining requests and seconds until full, rounded up', async (t) => {
  const policy: RatePolicy = { limit: 100, windowMs: 60_000, burst: 20 }
  const limiter = new TokenBucketLimiter(policy, 10)
  t.equal(limiter.consume('a', 0, 1), ADMITTED)
  // 19 left; 600 ms until the spent token is back.
  t.equal(rateLimitHeader(limiter), '"default";r=19;t=1')
  for (let i = 0; i < 19; i++) limiter.consume('a', 0, 1)
  // Empty: 20 × 600 ms = 12 s until full.
  t.equal(rateLimitHeader(limiter), '"default";r=0;t=12')
  t.equal(limiter.consume('a', 0, 1), LIMITED)
  t.equal(rateLimitHeader(limiter), '"default";r=0;t=12')
  t.equal(limiter.consume('a', 599, 1), LIMITED)
  // 599 ms refilled 0.998 of a token: still none whole, 11 401 ms to full.
  t.equal(rateLimitHeader(limiter), '"default";r=0;t=12')
  t.equal(limiter.consume('a', 1200, 1), ADMITTED)
  // Two tokens refilled since the bucket was empty, one spent: one left, 19 × 600 = 11 400 ms to full.
  t.equal(rateLimitHeader(limiter), '"default";r=1;t=12')
  t.equal(limiter.resetMs, 11_400)
  t.equal(limiter.consume('fresh', 1200, 1), ADMITTED)
  t.equal(rateLimitHeader(limiter), '"default";r=19;t=1', 'the header follows the last decision')
  t.equal(limiter.consume('a', 100_000, 1), ADMITTED)
  t.equal(rateLimitHeader(limiter), '"default";r=19;t=1')
})

t.test('RateLimit: t is 0 only for a full bucket', async (t) => {
  // 1000 per second: one token per millisecond; a cost-1 take is back after 1 ms.
  const limiter = new TokenBucketLimiter({ limit: 1000, windowMs: 1000, burst: 1000 }, 10)
  limiter.consume('a', 0, 1)
  t.equal(limiter.resetMs, 1)
  t.equal(rateLimitHeader(limiter), '"default";r=999;t=1')
  const whole = new TokenBucketLimiter({ limit: 1, windowMs: 1000, burst: 3 }, 10)
  whole.consume('a', 0, 3)
  t.equal(rateLimitHeader(whole), '"default";r=0;t=3')
  whole.consume('a', 2000, 1)
  t.equal(rateLimitHeader(whole), '"default";r=1;t=2', 'two refilled, one spent: 2 s to full')
  whole.consume('a', 2001, 1)
  t.equal(rateLimitHeader(whole), '"default";r=0;t=3', '2999 ms rounds up to 3 s')
  whole.consume('a', 5000, 1)
  t.equal(rateLimitHeader(whole), '"default";r=2;t=1', 'full again by 5000, one spent')
})
