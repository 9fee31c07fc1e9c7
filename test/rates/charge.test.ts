// Charging after the work through fastify.rates on the memory backend: a debt refuses with a wait
// that is never early, time repays it, units come back, bad amounts are typed errors that change
// nothing. The clock is injected into the memory backend: no sleeping.
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import admission, { memoryBackend, RatesInvalidArgumentError, RatesStoppedError, type RateDecision, type RatesBackend } from '../../lib/index.js'
import { chargeProblem, normalizePolicy } from '../../lib/rates/policy.js'
import { rejection } from '../helpers/errors.js'

const T0 = 1_700_000_000_000

const waitOf = (d: RateDecision): number => (d.denied ? d.retryAfterMs : 0)

async function build (t: Test, clock: { now: number }, backend?: RatesBackend): Promise<FastifyInstance> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend: backend ?? memoryBackend({ clock: () => clock.now }), rateLimit: false })
  return app
}

t.test('a charge beyond what is left puts the identity in debt; it is refused until time repays it, never earlier', async (t) => {
  const clock = { now: T0 }
  const app = await build(t, clock)
  // 100 tokens a minute (one per 600 ms), burst 100.
  const llm = app.rates.use('llm-tokens', { algorithm: 'token-bucket', limit: 100, windowMs: 60_000 })
  t.ok((await llm.consume('ada', { cost: 60 })).allowed, 'the estimate passes up front')
  // The work used 150: 90 more than the estimate, 50 beyond the bucket.
  const owed = await llm.charge('ada', 90)
  t.same([owed.allowed, owed.remaining], [false, 0])
  t.equal(waitOf(owed), 51 * 600, '50 owed and 1 to spend: 51 tokens of refill')
  const refused = await llm.consume('ada')
  t.same([refused.allowed, waitOf(refused)], [false, 51 * 600], 'a request in debt is refused with the same wait')
  clock.now += 51 * 600 - 1
  t.notOk((await llm.consume('ada')).allowed, 'one ms before the wait: still refused')
  clock.now += 1
  t.ok((await llm.consume('ada')).allowed, 'at the wait: admitted')
  t.ok((await llm.consume('bob')).allowed, 'another identity is untouched')
})

t.test('units an estimate took too many of come back, never beyond full capacity', async (t) => {
  const clock = { now: T0 }
  const app = await build(t, clock)
  const rows = app.rates.use('rows', { algorithm: 'fixed-window', limit: 1000, windowMs: 60_000 })
  t.equal((await rows.consume('ada', { cost: 500 })).remaining, 500)
  const back = await rows.charge('ada', -300)
  t.same([back.allowed, back.remaining], [true, 800])
  t.equal((await rows.charge('ada', -1000)).remaining, 1000, 'no more than what was used')
})

t.test('a debt is at most one capacity: what is owed beyond it is not recorded', async (t) => {
  const clock = { now: T0 }
  const app = await build(t, clock)
  const bytes = app.rates.use('bytes', { algorithm: 'fixed-window', limit: 10, windowMs: 1000 })
  await bytes.charge('ada', 10)
  await bytes.charge('ada', 10)
  const third = await bytes.charge('ada', 10)
  // 20 held: this window and the next; admitted from the window after (T0 is a window start).
  t.equal(waitOf(third), 2000)
  t.equal(third.resetAt, T0 + 2000)
})

t.test('bad amounts are typed errors that change nothing', async (t) => {
  const clock = { now: T0 }
  const app = await build(t, clock)
  const limiter = app.rates.use('llm', { algorithm: 'gcra', limit: 10, windowMs: 1000 })
  await limiter.consume('ada', { cost: 4 })
  for (const units of [1.5, Number.NaN, Infinity, 11, -11, '3', undefined, 2 ** 60]) {
    const error = await rejection(t, () => limiter.charge('ada', units as number))
    t.ok(error instanceof RatesInvalidArgumentError, `${String(units)}: RatesInvalidArgumentError`)
    t.match(error, { code: 'RATES_INVALID_ARGUMENT', path: 'units', message: /a safe integer from -10 to 10/ })
  }
  t.equal((await limiter.consume('ada')).remaining, 5, 'the quota is as the one consume left it')
  t.equal((await limiter.charge('ada', 0)).remaining, 5, '0 charges nothing and says what is left')
})

t.test('a backend without charge says so; a stopped runtime rejects', async (t) => {
  const clock = { now: T0 }
  const inner = memoryBackend({ clock: () => clock.now })
  const backend: RatesBackend = {
    kind: 'consume-only',
    limiter: (address, policy) => {
      const l = inner.limiter(address, policy)
      return { policy: l.policy, consume: l.consume.bind(l), state: l.state.bind(l), delete: l.delete.bind(l) }
    },
    stop: () => inner.stop()
  }
  const app = await build(t, clock, backend)
  const limiter = app.rates.use('x', { algorithm: 'token-bucket', limit: 5, windowMs: 1000 })
  t.match(await rejection(t, () => limiter.charge('ada', 1)), { code: 'RATES_INVALID_ARGUMENT', message: /"consume-only" backend has none/ })
  await app.close()
  t.ok(await rejection(t, () => limiter.charge('ada', 1)) instanceof RatesStoppedError)
})

t.test('a new identity with every slot live is not charged: RATES_UNAVAILABLE with a wait that allows for debts', async (t) => {
  const clock = { now: T0 }
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend: memoryBackend({ clock: () => clock.now, maxIdentities: 1 }), rateLimit: false })
  const limiter = app.rates.use('one', { algorithm: 'fixed-window', limit: 10, windowMs: 1000 })
  await limiter.consume('ada')
  await limiter.charge('ada', 10)
  const error = await rejection(t, () => limiter.charge('bob', 1))
  // A state charged may owe a window beyond its own: the wait is the worst recovery with a debt.
  t.match(error, { code: 'RATES_UNAVAILABLE', retryAfterMs: 2000 })
  t.equal(waitOf(await limiter.consume('ada')), 1000, 'ada owes 1 into the next window, where a request fits')
})

t.test('a policy without room for a debt of one capacity is told so at the charge; its consumes are unaffected', async (t) => {
  const clock = { now: T0 }
  const app = await build(t, clock)
  // 1e8 a day: burst * windowMs is a safe integer, three times it is not.
  const daily = app.rates.use('daily', { algorithm: 'token-bucket', limit: 100_000_000, windowMs: 86_400_000 })
  t.match(await rejection(t, () => daily.charge('ada', 1)), { code: 'RATES_INVALID_ARGUMENT', path: 'policy', message: /3 \* burst \* windowMs = 25920000000000000,/ })
  t.ok((await daily.consume('ada')).allowed)
  t.match(chargeProblem(normalizePolicy({ algorithm: 'fixed-window', limit: 4e15, windowMs: 1 })), /^3 \* limit = 12000000000000000/)
  t.match(chargeProblem(normalizePolicy({ algorithm: 'gcra', limit: 2195, windowMs: 1_000_000_000_001 })), /^limit \/ gcd\(limit, windowMs\)/)
  t.equal(chargeProblem(normalizePolicy({ algorithm: 'gcra', limit: 100, windowMs: 60_000 })), undefined)
  t.equal(chargeProblem(normalizePolicy({ algorithm: 'sliding-window-counter', limit: 100, windowMs: 60_000 })), undefined)
})

t.test('a stack charges every policy, each up to its own debt; refused while any is in debt, with the longest wait', async (t) => {
  const clock = { now: T0 }
  const app = await build(t, clock)
  // 10 a second (burst 10) and 100 a minute.
  const tokens = app.rates.use('tokens', [
    { algorithm: 'token-bucket', limit: 10, windowMs: 1000 },
    { algorithm: 'fixed-window', limit: 100, windowMs: 60_000 }
  ])
  t.ok((await tokens.consume('ada')).allowed)
  // 50 more than the estimate: the bucket keeps a debt of one capacity (10 below empty), the
  // window counts all 51.
  const owed = await tokens.charge('ada', 50)
  t.same(owed.policies.map((p) => [p.allowed, p.remaining]), [[false, 0], [true, 49]])
  t.equal(waitOf(owed), 1100, '10 owed and 1 to spend: 11 tokens at 10 a second')
  clock.now += 1099
  t.notOk((await tokens.consume('ada')).allowed, 'one ms early: refused')
  clock.now += 1
  const back = await tokens.consume('ada')
  t.same([back.allowed, back.policies[1]!.remaining], [true, 48], 'at the wait; the minute still counts what was charged')
  // Units back: each policy returns up to its own full capacity.
  const refund = await tokens.charge('ada', -100)
  t.same(refund.policies.map((p) => p.remaining), [10, 100])
})

t.test('a stack: |units| up to its largest capacity; a policy without room for a debt, a backend without charge, no free slot', async (t) => {
  const clock = { now: T0 }
  const app = await build(t, clock)
  const both = app.rates.use('both', [{ algorithm: 'token-bucket', limit: 10, windowMs: 1000 }, { algorithm: 'fixed-window', limit: 100, windowMs: 60_000 }])
  t.ok((await both.charge('ada', 100)).denied, 'the largest capacity is the bound')
  t.match(await rejection(t, () => both.charge('ada', 101)), { code: 'RATES_INVALID_ARGUMENT', path: 'units', message: /-100 to 100 \(the largest capacity/ })
  t.match(await rejection(t, () => both.charge('ada', 1.5)), { code: 'RATES_INVALID_ARGUMENT', path: 'units' })
  const daily = app.rates.use('daily', [{ algorithm: 'fixed-window', limit: 10, windowMs: 1000 }, { algorithm: 'token-bucket', limit: 100_000_000, windowMs: 86_400_000 }])
  t.match(await rejection(t, () => daily.charge('ada', 1)), { code: 'RATES_INVALID_ARGUMENT', path: 'policies[1]', message: /3 \* burst \* windowMs/ })

  const inner = memoryBackend({ clock: () => clock.now })
  const noStackCharge: RatesBackend = {
    kind: 'stack-consume-only',
    limiter: (address, policy) => inner.limiter(address, policy),
    stack: (address, policies) => {
      const s = inner.stack!(address, policies)
      return { policies: s.policies, consume: s.consume.bind(s), check: s.check.bind(s), state: s.state.bind(s), delete: s.delete.bind(s) }
    },
    stop: () => inner.stop()
  }
  const other = Fastify()
  t.teardown(() => other.close())
  await other.register(admission, { backend: noStackCharge, rateLimit: false })
  const plain = other.rates.use('plain', [{ algorithm: 'fixed-window', limit: 10, windowMs: 1000 }])
  t.match(await rejection(t, () => plain.charge('ada', 1)), { code: 'RATES_INVALID_ARGUMENT', message: /"stack-consume-only" backend has none/ })
  await other.close()
  t.ok(await rejection(t, () => plain.charge('ada', 1)) instanceof RatesStoppedError)

  const full = Fastify()
  t.teardown(() => full.close())
  await full.register(admission, { backend: memoryBackend({ clock: () => clock.now, maxIdentities: 1 }), rateLimit: false })
  const one = full.rates.use('one', [{ algorithm: 'fixed-window', limit: 10, windowMs: 1000 }, { algorithm: 'gcra', limit: 10, windowMs: 1000 }])
  await one.consume('ada')
  t.match(await rejection(t, () => one.charge('bob', 3)), { code: 'RATES_UNAVAILABLE' })
  await one.charge('ada', 3)
  t.same((await one.check('ada')).policies.map((p) => p.remaining), [6, 6], "bob was charged under no policy; ada's charge counted under both")
})

t.test('a stack\'s units returned from their deadline on are not taken (a fixed window\'s given back past its end)', async (t) => {
  const clock = { now: T0 }
  const stack = memoryBackend({ clock: () => clock.now }).stack('app#s', [
    normalizePolicy({ algorithm: 'fixed-window', limit: 10, windowMs: 60_000 }),
    normalizePolicy({ algorithm: 'token-bucket', limit: 100, windowMs: 1000 })
  ])
  t.equal(stack.now?.(), T0, 'the stack\'s clock is the backend\'s')
  await stack.consume('ada', 10)
  t.same((await stack.charge!('ada', -5, T0 + 1)).policies.map((p) => p.remaining), [5, 95], 'before the deadline: given back')
  clock.now = T0 + 1
  t.same((await stack.charge!('ada', -5, T0 + 1)).policies.map((p) => p.remaining), [5, 95], 'at it: not taken')
  t.same((await stack.charge!('ada', 2, T0 + 1)).policies.map((p) => p.remaining), [3, 93], 'a charge of more units is taken whatever the deadline')
})
