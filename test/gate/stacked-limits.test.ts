// Stacked policies at the gate (`rateLimit: [a, b]`): a request passes only when every policy has
// room; when one refuses none consumes; Retry-After is the largest honest wait; the RateLimit
// headers list every policy (draft 11). On memory and on Redis alike.
import t from 'tap'
import Fastify from 'fastify'
import admission, { AdmissionOptionError, memoryBackend, type RatesBackend } from '../../lib/index.js'
import { limitBackends, manualClock } from './limits-backends.js'

const BACKENDS = await limitBackends(t)

const SECOND = { algorithm: 'fixed-window', limit: 2, windowMs: 1000 } as const
const MINUTE = { algorithm: 'fixed-window', limit: 3, windowMs: 60_000, name: 'minute' } as const

for (const kind of BACKENDS) {
  t.test(`${kind.name}: all or nothing, the largest wait, every policy in the headers`, { skip: kind.skip }, async (t) => {
    const clock = manualClock(1_700_000_040_000)
    const backend = kind.make(t, clock.now)
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(admission, { backend, rateLimit: [SECOND, MINUTE] })
    app.get('/', async () => 'ok')
    const get = async (): Promise<{ status: number, policy: unknown, limit: unknown, retry: unknown }> => {
      const r = await app.inject('/')
      return { status: r.statusCode, policy: r.headers['ratelimit-policy'], limit: r.headers.ratelimit, retry: r.headers['retry-after'] }
    }
    const first = await get()
    t.same(first, { status: 200, policy: '"per-1s";q=2;w=1, "minute";q=3;w=60', limit: '"per-1s";r=1;t=1, "minute";r=2;t=60', retry: undefined })
    t.equal((await get()).status, 200)
    // The second's policy refuses: the minute's quota keeps its last unit (r=1, unconsumed).
    t.same(await get(), { status: 429, policy: '"per-1s";q=2;w=1, "minute";q=3;w=60', limit: '"per-1s";r=0;t=1, "minute";r=1;t=60', retry: '1' })
    t.same(await get(), { status: 429, policy: '"per-1s";q=2;w=1, "minute";q=3;w=60', limit: '"per-1s";r=0;t=1, "minute";r=1;t=60', retry: '1' })
    clock.advance(1000)
    t.same(await get(), { status: 200, policy: '"per-1s";q=2;w=1, "minute";q=3;w=60', limit: '"per-1s";r=1;t=1, "minute";r=0;t=59', retry: undefined })
    // Now the minute refuses (and the second would not): the wait is the minute's, the larger.
    const refused = await get()
    t.same(refused, { status: 429, policy: '"per-1s";q=2;w=1, "minute";q=3;w=60', limit: '"per-1s";r=1;t=1, "minute";r=0;t=59', retry: '59' })
    clock.advance(58_999)
    t.equal((await get()).status, 429, 'not a millisecond early')
    clock.advance(1)
    t.equal((await get()).status, 200)
    t.match(app.admission.stats().routes['GET /'], { admitted: 4, limited: 4 })
    // The registry holds every policy's state; deleting it starts the client afresh.
    const state = await app.admission.registryOf('GET /')!.get('127.0.0.1')
    t.ok(Array.isArray(state) && state.length === 2, 'a state per policy')
    t.equal(await app.admission.registry.delete('127.0.0.1'), true)
    t.equal((await get()).limit, '"per-1s";r=1;t=1, "minute";r=2;t=60')
  })

  t.test(`${kind.name}: both refuse — the largest wait; a route's own stack and cost`, { skip: kind.skip }, async (t) => {
    const clock = manualClock(1_700_000_040_000)
    const backend = kind.make(t, clock.now)
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(admission, { backend, rateLimit: false })
    app.get('/bulk', {
      config: { admission: { cost: 2, rateLimit: [{ limit: 2, windowMs: 1000 }, { algorithm: 'gcra', limit: 4, windowMs: 10_000, name: 'ten' }] } }
    }, async () => 'ok')
    const first = await app.inject('/bulk')
    t.equal(first.statusCode, 200)
    // The bucket's next token in 500 ms; gcra (a unit every 2.5 s) has 2 left, a third in 2.5 s (full in 5 s).
    t.equal(first.headers.ratelimit, '"per-1s";r=0;t=1, "ten";r=2;t=3')
    const second = await app.inject('/bulk')
    t.equal(second.statusCode, 429)
    // Token bucket: 2 tokens back in 1 s; gcra 4 per 10 s with 2 left: room for 2 now — only the bucket refuses.
    t.equal(second.headers['retry-after'], '1')
    clock.advance(1000)
    t.equal((await app.inject('/bulk')).statusCode, 200)
    clock.advance(1000)
    const both = await app.inject('/bulk')
    t.equal(both.statusCode, 429, 'gcra is out now (and the bucket has 2)')
    // The bucket is full (no t); gcra has none left and its next unit in 500 ms (full in 8 s).
    t.equal(both.headers.ratelimit, '"per-1s";r=2, "ten";r=0;t=1')
    t.equal(both.headers['retry-after'], '3', 'gcra gives back 2 units in 5 s, 2 of which have passed')
  })
}

t.test('a list of one is the single policy; names, twins and sizes are checked at registration', async (t) => {
  const register = async (rateLimit: unknown, backend?: RatesBackend): Promise<unknown> => {
    const app = Fastify()
    try {
      await app.register(admission, { rateLimit: rateLimit as never, ...(backend === undefined ? {} : { backend }) })
      app.get('/', async () => 'ok')
      await app.ready()
      return (await app.inject('/')).headers['ratelimit-policy']
    } catch (error) {
      return error
    } finally {
      await app.close()
    }
  }
  t.equal(await register([{ limit: 5, windowMs: 1000 }]), '"default";q=5;w=1')
  t.equal(await register([{ limit: 5, windowMs: 1000, name: 'burst' }]), '"burst";q=5;w=1')
  const cases: Array<[unknown, string, RegExp]> = [
    [[], 'rateLimit', /a list of 1 to 8 policies/],
    [Array.from({ length: 9 }, (_, i) => ({ limit: i + 1, windowMs: 1000 })), 'rateLimit', /a list of 1 to 8 policies/],
    [[SECOND, { ...SECOND }], 'rateLimit[1]', /a policy other than rateLimit\[0\]/],
    [[{ limit: 1, windowMs: 1000 }, { limit: 2, windowMs: 1000 }], 'rateLimit[1].name', /a name no other policy of the list has/],
    [[{ limit: 1, windowMs: 1000, name: 'Upper' }], 'rateLimit[0].name', /a lowercase letter/],
    [[{ limit: 1, windowMs: 1000, name: 7 }], 'rateLimit[0].name', /a name of 1 to 64/],
    [[{ limit: 0, windowMs: 1000 }], 'rateLimit[0].limit', /positive/],
    [[null], 'rateLimit[0]', /a plain object/],
    [[[1]], 'rateLimit[0]', /a plain object/],
    [[Object.defineProperty({ limit: 1, windowMs: 1000 }, 'name', { get: () => 'x', enumerable: true })], 'rateLimit[0].name', /a data property/]
  ]
  for (const [value, path, message] of cases) {
    const error = await register(value)
    t.type(error, AdmissionOptionError, path)
    t.equal((error as AdmissionOptionError).path, path)
    t.match((error as Error).message, message)
  }
  // A backend without stack() cannot hold a stack: said at registration, with the backend's kind.
  const inner = memoryBackend()
  const plain: RatesBackend = { kind: 'custom', limiter: (address, policy) => inner.limiter(address, policy), stop: async () => {} }
  const error = await register([SECOND, MINUTE], plain)
  t.type(error, AdmissionOptionError)
  t.match((error as Error).message, /backend \(kind "custom"\) has no stack\(\), which a list of policies needs/)
})

t.test('a cost beyond the least capacity of a stack, and groups of stacks', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: [{ limit: 10, windowMs: 1000 }, { limit: 3, windowMs: 60_000 }] })
  app.get('/a', { config: { admission: { cost: 4 } } }, async () => 'ok')
  await t.rejects(async () => { await app.ready() }, { path: 'config.admission of GET /a.cost', message: /at most the policy's capacity \(3, the least of its policies'\)/ })

  const grouped = Fastify()
  t.teardown(() => grouped.close())
  await grouped.register(admission, { rateLimit: false })
  const stack = [{ limit: 2, windowMs: 1000 }, { limit: 3, windowMs: 60_000 }]
  grouped.get('/x', { config: { admission: { groupId: 'g', rateLimit: stack } } }, async () => 'ok')
  grouped.get('/y', { config: { admission: { groupId: 'g', rateLimit: [...stack] } } }, async () => 'ok')
  grouped.get('/z', { config: { admission: { groupId: 'g', rateLimit: [stack[0]!] } } }, async () => 'ok')
  await t.rejects(async () => { await grouped.ready() }, { path: 'config.admission of GET /z.groupId', message: /2 per 1000 ms \(token-bucket\) as "per-1s" and 3 per 60000 ms \(token-bucket\) as "per-60s" \(set by GET \/x\)/ })
})

t.test('routes of a group with a stack share it', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: false })
  const stack = [{ limit: 5, windowMs: 1000 }, { algorithm: 'fixed-window', limit: 2, windowMs: 60_000 }] as const
  app.get('/x', { config: { admission: { groupId: 'g', rateLimit: [...stack] } } }, async () => 'ok')
  app.get('/y', { config: { admission: { groupId: 'g', rateLimit: [...stack] } } }, async () => 'ok')
  t.equal((await app.inject('/x')).statusCode, 200)
  t.equal((await app.inject('/y')).statusCode, 200)
  t.equal((await app.inject('/x')).statusCode, 429)
})
