// Type tests of the rates capability as published.
import Fastify from 'fastify'
import admission, {
  memoryBackend,
  RatesError,
  RatesPolicyConflictError,
  type RatePolicy,
  type RateDecision,
  type RateLimiter,
  type RatesBackend,
  type StackDecision,
  type StackedRateLimiter,
  type StackLimiter
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
    const code: RatesError['code'] = error.code
    void code
  }
  if (error instanceof RatesPolicyConflictError) {
    // A policy, or a stack's list of them.
    const existing = error.existing
    if ('algorithm' in existing) void existing.algorithm
    else void existing[0]?.algorithm
    // @ts-expect-error it may be a list
    void error.requested.algorithm
  }
}

// Stacks: several policies on one quota, all consume or none does.
const perSecond: RatePolicy = { algorithm: 'token-bucket', limit: 10, windowMs: 1_000 }
const limits: StackedRateLimiter = app.rates.use('api', [perSecond, { algorithm: 'fixed-window', limit: 10_000, windowMs: 86_400_000 }])
app.rates.global.use('egress', [perSecond])
const list: readonly RatePolicy[] = [perSecond]
const fromList: StackedRateLimiter = app.rates.use('from-list', list)
void fromList
const stackPolicies: StackedRateLimiter['policies'] = limits.policies
void stackPolicies
const stacked: StackDecision = await limits.consume({ userId: 'u1' }, { cost: 2 })
const checked: StackDecision = await limits.check('u1')
void checked
const each: StackDecision['policies'] = stacked.policies
const first: boolean = each[0]!.allowed
void first
if (stacked.denied) {
  const wait: number = stacked.retryAfterMs
  void wait
}
const asDecision: RateDecision = stacked
void asDecision
// @ts-expect-error a single limiter has no check (stack one policy for that)
void send.check
// @ts-expect-error a single limiter's decision has no per-policy outcomes
void decision.policies
// @ts-expect-error policies are policy objects
app.rates.use('x', [{ algorithm: 'gcra' }])
// @ts-expect-error a stack's cost is a number too
await limits.check('u', { cost: '1' })

// A custom backend may offer stacks.
declare const stackLimiter: StackLimiter
const withStacks: RatesBackend = { kind: 'custom', limiter: () => { throw new Error('unused') }, stack: () => stackLimiter, stop: async () => {} }
const withoutStacks: RatesBackend = { kind: 'custom', limiter: () => { throw new Error('unused') }, stop: async () => {} }
void withStacks; void withoutStacks

// Charging after the work: a single limiter and a stack, units a number.
const owed: RateDecision = await send.charge('user-1', 250)
const owedStack: StackDecision = await limits.charge('u', -3)
void owed; void owedStack
// @ts-expect-error units are a number
await send.charge('user-1', '250')
