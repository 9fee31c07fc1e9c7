import t from 'tap'
import Fastify from 'fastify'
import admission, { memoryBackend, type AdmissionOptions } from '../../lib/index.js'

async function appAt (clock: { now: number }, options: AdmissionOptions, routes: (app: ReturnType<typeof Fastify>) => void = (app) => { app.get('/', async () => 'ok') }): Promise<ReturnType<typeof Fastify>> {
  const app = Fastify()
  await app.register(admission, { backend: memoryBackend({ clock: () => clock.now }), ...options })
  routes(app)
  await app.ready()
  return app
}

t.test('while blocked the fields say r=0 and t until the block ends; Retry-After matches', async (t) => {
  const clock = { now: 5_000_000 }
  const app = await appAt(clock, { rateLimit: { algorithm: 'fixed-window', limit: 1, windowMs: 10_000, penalty: 'restart' } })
  t.teardown(() => app.close())
  t.equal((await app.inject('/')).statusCode, 200)
  clock.now += 9_500
  const first = await app.inject('/')
  t.same([first.statusCode, first.headers['retry-after'], first.headers.ratelimit], [429, '10', '"default";r=0;t=10'], 'the window ends in 500 ms, the block in 10 s')
  clock.now += 1_000
  const blocked = await app.inject('/')
  t.same([blocked.statusCode, blocked.headers['retry-after'], blocked.headers.ratelimit], [429, '10', '"default";r=0;t=10'], 'a new window with room, and still refused: the block restarted')
  t.equal(blocked.headers['ratelimit-policy'], '"default";q=1;w=10', 'the policy as without a penalty')
})

t.test("a route's partial policy takes the plugin's penalty; its own replaces it", async (t) => {
  const clock = { now: 6_000_000 }
  const app = await appAt(clock, { rateLimit: { algorithm: 'fixed-window', limit: 1, windowMs: 1_000, penalty: { mode: 'double', maxMs: 8_000 } } }, (app) => {
    app.get('/five', { config: { admission: { rateLimit: { limit: 5 } } } }, async () => 'ok')
    app.get('/longer', { config: { admission: { rateLimit: { windowMs: 2_000 } } } }, async () => 'ok')
    app.get('/mild', { config: { admission: { rateLimit: { limit: 1, penalty: 'restart' } } } }, async () => 'ok')
  })
  t.teardown(() => app.close())
  const waits = async (url: string, n: number): Promise<string[]> => {
    const out: string[] = []
    for (let i = 0; i < n; i++) {
      clock.now += 1
      const res = await app.inject(url)
      if (res.statusCode === 429) out.push(res.headers['retry-after'] as string)
    }
    return out
  }
  t.same(await waits('/five', 8), ['1', '2', '4'], "five admitted, then the plugin's doubling")
  t.same(await waits('/longer', 6), ['2', '4', '8', '16', '32'], "the route's window: the doubling from 2 s, up to 64 of its windows (the plugin's bound was for its own window)")
  t.same(await waits('/mild', 4), ['1', '1', '1'], "the route's own penalty")
})

t.test('a penalty in a list (also a tier\'s) or with login throttling is refused at registration, naming the field', async (t) => {
  const cases: Array<[AdmissionOptions, string, RegExp]> = [
    [{ rateLimit: [{ limit: 1, windowMs: 1000, penalty: 'restart' } as never, { limit: 10, windowMs: 60_000 }] }, 'rateLimit[0].penalty', /absent in a list of policies/],
    [{ rateLimit: { tiers: { free: [{ limit: 1, windowMs: 1000, penalty: 'restart' } as never] }, tier: () => 'free' } }, 'rateLimit.tiers.free[0].penalty', /absent in a list of policies/],
    [{ rateLimit: { limit: 1, windowMs: 1000, penalty: 'sometimes' as never } }, 'rateLimit.penalty', /'restart' or 'double'/]
  ]
  for (const [options, path, message] of cases) {
    const app = Fastify()
    t.teardown(() => app.close())
    const error = await app.register(admission, options).ready().then(() => undefined, (e: unknown) => e)
    t.match(error, { code: 'ADMISSION_INVALID_OPTION', path, message }, path)
  }
  const login = Fastify()
  t.teardown(() => login.close())
  await login.register(admission, { rateLimit: { limit: 5, windowMs: 60_000, penalty: 'restart' } })
  login.post('/login', { config: { admission: { count: 'failures' } } }, async () => 'ok')
  t.match(await login.ready().then(() => undefined, (e: unknown) => e), { code: 'ADMISSION_INVALID_OPTION', path: 'config.admission of POST /login.count', message: /with a penalty/ })
})

t.test("a tier's one policy may have a penalty: each tier blocks on its own quota", async (t) => {
  const clock = { now: 7_000_000 }
  const app = await appAt(clock, { rateLimit: { tiers: { free: { algorithm: 'fixed-window', limit: 1, windowMs: 5_000, penalty: 'restart' }, pro: { algorithm: 'fixed-window', limit: 1, windowMs: 5_000 } }, tier: (request) => String(request.headers['x-tier']) } })
  t.teardown(() => app.close())
  const ask = async (tier: string, ms: number): Promise<number> => {
    clock.now = 7_000_000 + ms
    return (await app.inject({ url: '/', headers: { 'x-tier': tier } })).statusCode
  }
  t.same([await ask('free', 0), await ask('free', 4_000), await ask('free', 6_000)], [200, 429, 429], 'free: the block restarted at 4 s, still on at 6 s')
  t.same([await ask('pro', 0), await ask('pro', 4_000), await ask('pro', 6_000)], [200, 429, 200], 'pro: no penalty, the next window admits')
})

t.test('logs name a policy with its penalty', async (t) => {
  const { describePolicy } = await import('../../lib/gate/options/policy-text.js')
  const { normalizePolicy } = await import('../../lib/rates/policy.js')
  t.equal(describePolicy(normalizePolicy({ algorithm: 'fixed-window', limit: 5, windowMs: 1000, penalty: 'restart' })), '5 per 1000 ms (fixed-window, penalty restart)')
  t.equal(describePolicy(normalizePolicy({ algorithm: 'token-bucket', limit: 5, windowMs: 1000, burst: 2, penalty: 'double' })), '5 per 1000 ms (token-bucket, burst 2, penalty double up to 64000 ms)')
  t.equal(describePolicy(normalizePolicy({ algorithm: 'gcra', limit: 5, windowMs: 1000 })), '5 per 1000 ms (gcra)')
})
