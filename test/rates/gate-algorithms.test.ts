// The HTTP gate's `rateLimit` with each of the four algorithms, through fastify.inject and an
// injected clock: 429 after the quota, Retry-After = ceil(retryAfterMs / 1000), never early; the
// gate and the rates capability decide alike (one policy language, one mechanism).
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance, type LightMyRequestResponse } from 'fastify'
import admission, { memoryBackend, type RatePolicy } from '../../lib/index.js'
import type { Algorithm } from '../../lib/core/rates/types.js'

const T0 = 1_700_000_000_000 // a multiple of 2500: windows start at T0
const START = T0 + 100

// limit 3 per 2500 ms, all sent at START: the 4th request waits … `t` is RateLimit's after each of
// the three admitted requests, then on the refused fourth: the seconds until one more unit comes.
const EXPECTED: Record<Algorithm, { retryAfterMs: number, retryAfter: string, t: readonly number[] }> = {
  // … for one token: 2500 / 3 ms, rounded up; the next token is as far after each request.
  'token-bucket': { retryAfterMs: 834, retryAfter: '1', t: [1, 1, 1, 1] },
  // … for the next window, 2400 ms away, when all of the quota comes back.
  'fixed-window': { retryAfterMs: 2400, retryAfter: '3', t: [3, 3, 3, 3] },
  // … for the next window, then for a third of the previous one to slide out. With c counted,
  // 4 - c more fit once 1/c of the next window has passed: 2400 + 2500, + 1250, + 834 ms.
  'sliding-window-counter': { retryAfterMs: 2400 + 834, retryAfter: '4', t: [5, 4, 4, 4] },
  // … for one emission interval, as the next unit after each request.
  gcra: { retryAfterMs: 834, retryAfter: '1', t: [1, 1, 1, 1] }
}

interface Rig { app: FastifyInstance, clock: { now: number }, limits: number[] }

async function rig (t: Test, rateLimit: RatePolicy | false, routes: (app: FastifyInstance) => void): Promise<Rig> {
  const clock = { now: START }
  const limits: number[] = []
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, {
    backend: memoryBackend({ clock: () => clock.now }),
    rateLimit,
    key: (request) => String(request.headers['x-client'] ?? 'anonymous'),
    onLimit: (_request, retryAfterMs) => { limits.push(retryAfterMs) }
  })
  routes(app)
  await app.ready()
  return { app, clock, limits }
}

async function get (app: FastifyInstance, url: string, client = 'c1'): Promise<LightMyRequestResponse> {
  return await app.inject({ url, headers: { 'x-client': client } })
}

for (const algorithm of Object.keys(EXPECTED) as Algorithm[]) {
  const expected = EXPECTED[algorithm]
  const policy: RatePolicy = { algorithm, limit: 3, windowMs: 2500 }

  t.test(`plugin rateLimit with ${algorithm}`, async (t) => {
    const { app, clock, limits } = await rig(t, policy, (app) => {
      app.get('/', async () => 'ok')
      app.get('/other', async () => 'ok')
    })
    // The same policy through the rates capability, consumed alike: the reference decision.
    const reference = app.rates.use('reference', policy)
    for (let i = 0; i < 3; i++) {
      const res = await get(app, i === 1 ? '/other' : '/')
      t.equal(res.statusCode, 200, `request ${i + 1}`)
      t.equal(res.headers['ratelimit-policy'], '"default";q=3;w=3', 'RateLimit-Policy on an admitted request: limit 3, window 2.5 s rounded up')
      const mirror = await reference.consume('ref')
      t.equal(res.headers.ratelimit, `"default";r=${mirror.remaining};t=${Math.ceil((mirror.moreAt! - clock.now) / 1000)}`, 'RateLimit: what the same decision leaves, and when more comes')
      t.equal(res.headers.ratelimit, `"default";r=${2 - i};t=${expected.t[i]}`)
    }
    const limited = await get(app, '/')
    t.equal(limited.statusCode, 429, 'the 4th request (routes share the plugin quota)')
    t.equal(limited.headers['retry-after'], expected.retryAfter)
    t.strictSame(limits, [expected.retryAfterMs], 'onLimit gets retryAfterMs')
    const ref = await reference.consume('ref')
    t.match(ref, { denied: true, retryAfterMs: expected.retryAfterMs }, 'the rates capability decides the same')
    t.equal(limited.headers['retry-after'], String(Math.ceil((ref as { retryAfterMs: number }).retryAfterMs / 1000)), 'Retry-After = ceil(the capability\'s retryAfterMs / 1000)')
    t.equal(limited.headers.ratelimit, `"default";r=0;t=${Math.ceil((ref.moreAt! - clock.now) / 1000)}`, 'RateLimit on a limited request: none left, more at the decision\'s moreAt')
    t.equal(limited.headers.ratelimit, `"default";r=0;t=${expected.t[3]}`)
    t.equal((await get(app, '/', 'c2')).statusCode, 200, 'another client has its own quota')

    clock.now = START + expected.retryAfterMs - 1
    t.equal((await get(app, '/')).statusCode, 429, 'one millisecond early: still limited')
    clock.now = START + expected.retryAfterMs
    t.equal((await get(app, '/')).statusCode, 200, 'after retryAfterMs: admitted (never early)')
    t.match(app.admission.stats(), { admitted: 5, limited: 2 })
  })

  t.test(`route rateLimit with ${algorithm}`, async (t) => {
    const { app, clock } = await rig(t, false, (app) => {
      app.get('/limited', { config: { admission: { rateLimit: policy } } }, async () => 'ok')
      app.get('/other', { config: { admission: { rateLimit: policy } } }, async () => 'ok')
      app.get('/free', async () => 'ok')
    })
    for (let i = 0; i < 3; i++) t.equal((await get(app, '/limited')).statusCode, 200)
    const limited = await get(app, '/limited')
    t.equal(limited.statusCode, 429)
    t.equal(limited.headers['retry-after'], expected.retryAfter)
    t.equal((await get(app, '/other')).statusCode, 200, 'each route with its own rateLimit has its own quota')
    for (let i = 0; i < 10; i++) if ((await get(app, '/free')).statusCode !== 200) t.fail('/free has no limit')
    clock.now = START + expected.retryAfterMs
    t.equal((await get(app, '/limited')).statusCode, 200)
  })
}

t.test('the gate checks its policies with the rates validator', async (t) => {
  const app = Fastify()
  app.register(admission, { rateLimit: { algorithm: 'fixed-window', limit: 3, windowMs: 1000, burst: 3 } as never })
  const error = await app.ready().then(() => undefined, (e: unknown) => e)
  t.match(error, { message: /rateLimit\.burst/ }, 'a burst for a window algorithm is refused')
  await app.close()
})
