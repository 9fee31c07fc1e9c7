// Type tests of the rates capability as published.
import Fastify from 'fastify'
import admission, {
  memoryBackend,
  RatesError,
  RatesPolicyConflictError,
  type RateDecision,
  type RateLimiter,
  type RatesErrorCode
} from 'fastify-admission'

const app = Fastify()
await app.register(admission, { backend: memoryBackend({ maxIdentities: 10_000 }), rateLimit: { algorithm: 'gcra', limit: 10, windowMs: 1_000, burst: 5 } })

const send: RateLimiter = app.rates.use('send-message', { algorithm: 'sliding-window-counter', limit: 100, windowMs: 60_000 })
app.rates.global.use('platform.tenant-egress', { algorithm: 'token-bucket', limit: 1_000, windowMs: 60_000, burst: 100 })

const decision: RateDecision = await send.consume({ tenantId: 't1', userId: 'u1' }, { cost: 1 })
if (decision.denied) {
  const wait: number = decision.retryAfterMs
  void wait
} else {
  // @ts-expect-error an allowed decision has no retryAfterMs
  void decision.retryAfterMs
}
const remaining: number = decision.remaining
const resetAt: number = decision.resetAt
void remaining; void resetAt

await send.consume('user-1')
await send.consume(42)
await send.consume(42n)
await send.consume(['tenant', 7, true])
// @ts-expect-error identities are primitives, tuples or flat records
await send.consume({ nested: { no: 1 } })
// @ts-expect-error unknown algorithm
app.rates.use('x', { algorithm: 'leaky', limit: 1, windowMs: 1 })
// @ts-expect-error limit and windowMs are required
app.rates.use('x', { algorithm: 'gcra' })
// @ts-expect-error cost is a number
await send.consume('u', { cost: '2' })

try {
  app.rates.use('send-message', { algorithm: 'fixed-window', limit: 1, windowMs: 1 })
} catch (error) {
  if (error instanceof RatesError) {
    const code: RatesErrorCode = error.code
    void code
  }
  if (error instanceof RatesPolicyConflictError && 'algorithm' in error.existing) void error.existing.algorithm
}
