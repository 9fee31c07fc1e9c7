// Charging after the work on Redis, through fastify.rates: two apps of one fleet see one debt and
// decide exactly as the memory backend does on the same calls; a charge is one script call (a
// stack's too) and never answered from the deny cache; a penalty's block outlives a charge; a key
// of another policy is a conflict that changes nothing. The script runs on the test clock (its
// test-time argument): no sleeping.
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import type { Redis } from 'ioredis'
import admission, { memoryBackend, RatesPolicyConflictError, type RateDecision, type RatesBackend } from '../../../lib/index.js'
import { testingRedisBackend } from '../../../lib/backends/redis/redis-backend.js'
import { counting, deleteKeys, sharedRedis, uniquePrefix, type Counted } from './helpers.js'

const shared = await sharedRedis()
const skip = 'skip' in shared ? shared.skip : false
const redis = 'redis' in shared ? shared.redis : (undefined as unknown as Redis)
if (!skip) t.teardown(() => redis.quit())

const T0 = 1_800_000_000_000
const waitOf = (d: RateDecision): number => (d.denied ? d.retryAfterMs : 0)
const view = (d: RateDecision): [boolean, number, number, number] => [d.allowed, d.remaining, waitOf(d), d.resetAt]

async function appOn (t: Test, backend: RatesBackend): Promise<FastifyInstance> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend, rateLimit: false })
  return app
}

function fleet (t: Test, label: string, clock: { now: number }, denyCache = true): { client: Counted, backend: () => RatesBackend } {
  const prefix = uniquePrefix(label)
  t.teardown(() => deleteKeys(redis, prefix))
  const client = counting(redis)
  return { client, backend: () => testingRedisBackend({ client, prefix, timeoutMs: 10_000, ...(denyCache ? {} : { denyCache: false as const }) }, { now: () => clock.now }) }
}

// Without the deny cache: with it, a refund made by one app reaches another's remembered denial
// only when that ends (the next test).
t.test('two apps of a fleet share one debt, and decide as the memory backend does', { skip }, async (t) => {
  const clock = { now: T0 }
  const { backend } = fleet(t, 'charge-fleet', clock, false)
  const a = await appOn(t, backend())
  const b = await appOn(t, backend())
  const reference = await appOn(t, memoryBackend({ clock: () => clock.now }))
  for (const algorithm of ['token-bucket', 'fixed-window', 'sliding-window-counter', 'gcra'] as const) {
    const policy = { algorithm, limit: 100, windowMs: 60_000 }
    const [onA, onB, memory] = [a, b, reference].map((app) => app.rates.use(`llm-${algorithm}`, policy))
    clock.now = T0
    // The steps of one client: an estimate up front, the real amount after, requests while in debt.
    const steps: Array<[number, 'consume' | 'charge', number, number]> = [
      [0, 'consume', 60, 0], [5, 'charge', 90, 1], [10, 'consume', 1, 0], [30_000, 'consume', 1, 1], [61_000, 'charge', -20, 0],
      [90_000, 'consume', 1, 1], [125_000, 'consume', 5, 0], [130_000, 'charge', 100, 1], [200_000, 'consume', 1, 0]
    ]
    for (const [at, call, amount, which] of steps) {
      clock.now = T0 + at
      const app = which === 0 ? onA! : onB!
      const got = call === 'consume' ? await app.consume('ada', { cost: amount }) : await app.charge('ada', amount)
      const expected = call === 'consume' ? await memory!.consume('ada', { cost: amount }) : await memory!.charge('ada', amount)
      t.same(view(got), view(expected), `${algorithm} at +${at}: ${call} ${amount} on app ${which === 0 ? 'a' : 'b'}`)
    }
  }
})

t.test('a charge is one script call and never answered from the deny cache; a stack charges in one call too', { skip }, async (t) => {
  const clock = { now: T0 }
  const { client, backend } = fleet(t, 'charge-calls', clock)
  const app = await appOn(t, backend())
  const bytes = app.rates.use('bytes', { algorithm: 'fixed-window', limit: 10, windowMs: 1000 })
  await bytes.charge('ada', 10)
  t.equal(client.calls.evalsha, 1, 'one call')
  t.notOk((await bytes.consume('ada')).allowed, 'in debt: refused (and remembered by the deny cache)')
  const calls = client.calls.evalsha
  t.notOk((await bytes.consume('ada')).allowed)
  t.equal(client.calls.evalsha, calls, 'the second refusal came from the deny cache')
  const refund = await bytes.charge('ada', -10)
  t.equal(client.calls.evalsha, calls + 1, 'the refund went to Redis')
  t.same([refund.allowed, refund.remaining], [true, 10])
  t.ok((await bytes.consume('ada')).allowed, 'and the cache forgot the denial it held')

  const stacked = app.rates.use('stacked', [{ algorithm: 'token-bucket', limit: 10, windowMs: 1000 }, { algorithm: 'fixed-window', limit: 100, windowMs: 60_000 }])
  const before = client.calls.evalsha
  const owed = await stacked.charge('ada', 50)
  t.equal(client.calls.evalsha, before + 1, 'a stack charges in one call')
  t.same(owed.policies.map((p) => [p.allowed, p.remaining]), [[false, 0], [true, 50]])
  t.equal(waitOf(owed), 1100, "the bucket's debt of one capacity, and one token to spend")
})

t.test("a refund by another app: this app's remembered denial holds at most to the wait it gave, never admits early", { skip }, async (t) => {
  const clock = { now: T0 }
  const { backend } = fleet(t, 'charge-refund', clock)
  const a = await appOn(t, backend())
  const b = await appOn(t, backend())
  const policy = { algorithm: 'sliding-window-counter', limit: 100, windowMs: 60_000 } as const
  const [onA, onB] = [a, b].map((app) => app.rates.use('rows', policy))
  await onA!.charge('ada', 100)
  await onA!.charge('ada', 50)
  clock.now = T0 + 1000
  const refused = await onB!.consume('ada')
  t.notOk(refused.allowed, 'b is refused, and remembers it')
  await onA!.charge('ada', -100)
  t.ok((await onA!.consume('ada')).allowed, 'a, which returned the units, sees them at once')
  clock.now = T0 + 1000 + waitOf(refused) - 1
  t.notOk((await onB!.consume('ada')).allowed, "b's remembered denial still answers just before its wait ends")
  clock.now += 1
  t.ok((await onB!.consume('ada')).allowed, 'from the wait it gave on, b asks Redis, which has the units back')
})

t.test("a penalty's block outlives a charge: refused until its end, then as the quota says", { skip }, async (t) => {
  const clock = { now: T0 }
  const { backend } = fleet(t, 'charge-penalty', clock)
  const app = await appOn(t, backend())
  const reference = await appOn(t, memoryBackend({ clock: () => clock.now }))
  const policy = { algorithm: 'fixed-window', limit: 2, windowMs: 1000, penalty: 'restart' } as const
  const [redisLimiter, memoryLimiter] = [app, reference].map((one) => one.rates.use('login', policy))
  const steps: Array<[number, 'consume' | 'charge', number]> = [
    [0, 'consume', 2], [1, 'consume', 1], [500, 'charge', -2], [999, 'charge', 1], [1500, 'consume', 1], [2100, 'charge', 2], [2200, 'consume', 1]
  ]
  for (const [at, call, amount] of steps) {
    clock.now = T0 + at
    const run = (limiter: typeof redisLimiter): Promise<RateDecision> => call === 'consume' ? limiter!.consume('ada', { cost: amount }) : limiter!.charge('ada', amount)
    const got = await run(redisLimiter)
    t.same(view(got), view(await run(memoryLimiter)), `+${at}: ${call} ${amount}`)
    if (at === 500) t.same([got.allowed, waitOf(got)], [false, 501], 'units back, still blocked to the end of the block (+1001 on)')
  }
})

t.test('a key written under another policy: a charge is a conflict and changes nothing', { skip }, async (t) => {
  const clock = { now: T0 }
  const { backend } = fleet(t, 'charge-conflict', clock)
  const one = await appOn(t, backend())
  const other = await appOn(t, backend())
  await one.rates.use('shared', { algorithm: 'fixed-window', limit: 5, windowMs: 1000 }).consume('ada', { cost: 2 })
  const error = await other.rates.use('shared', { algorithm: 'fixed-window', limit: 6, windowMs: 1000 }).charge('ada', 3).catch((e: unknown) => e)
  t.ok(error instanceof RatesPolicyConflictError)
  t.equal((await one.rates.use('shared', { algorithm: 'fixed-window', limit: 5, windowMs: 1000 }).consume('ada')).remaining, 2, 'the stored count is as it was')
})

t.test('a route charges after its response on Redis: one script call, and every app of the fleet refuses the debt', { skip }, async (t) => {
  const clock = { now: T0 }
  const { client, backend } = fleet(t, 'charge-route', clock)
  const apps = await Promise.all([0, 1].map(async () => {
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(admission, { backend: backend(), rateLimit: { algorithm: 'token-bucket', limit: 100, windowMs: 60_000 } })
    app.get('/complete', { config: { admission: { cost: 10, charge: (request) => Number(request.headers['x-used']) } } }, async () => 'ok')
    await app.ready()
    return app
  }))
  const settled = async (calls: number): Promise<void> => {
    while (client.calls.evalsha < calls || client.pending() > 0) await new Promise((resolve) => setImmediate(resolve))
  }
  const before = client.calls.evalsha
  t.equal((await apps[0]!.inject({ url: '/complete', headers: { 'x-used': '60' } })).statusCode, 200)
  // The charge is taken as the response ends; its round trip is one script call.
  await settled(before + 2)
  t.equal(client.calls.evalsha, before + 2, 'the decision and the charge')
  t.equal((await apps[0]!.inject({ url: '/complete', headers: { 'x-used': '100' } })).statusCode, 200, '40 left: room for the estimate')
  await settled(before + 4)
  const refused = await apps[1]!.inject({ url: '/complete', headers: { 'x-used': '10' } })
  t.equal(refused.statusCode, 429, 'the other app refuses the debt')
  t.equal(refused.headers['retry-after'], '42', '60 owed and 10 to spend: 70 tokens at one per 600 ms')
})
