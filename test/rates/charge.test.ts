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
