// Tiers (`rateLimit: { tiers, tier }`): a request picks one of the limits declared at registration
// by a synchronous function of the request; each tier has its own quota, headers, registry and
// counters. On memory and on Redis alike.
import t from 'tap'
import Fastify, { type FastifyRequest } from 'fastify'
import admission, { AdmissionOptionError } from '../../lib/index.js'
import { AdmissionTierError } from '../../lib/gate/errors.js'
import { limitBackends, manualClock } from './limits-backends.js'

const BACKENDS = await limitBackends(t)

const plan = (request: FastifyRequest): string => String(request.headers['x-plan'] ?? 'free')
const TIERS = {
  tiers: {
    free: { algorithm: 'fixed-window', limit: 1, windowMs: 60_000 },
    pro: [{ algorithm: 'fixed-window', limit: 2, windowMs: 1000 }, { algorithm: 'fixed-window', limit: 100, windowMs: 3_600_000, name: 'hour' }]
  },
  tier: plan
} as const

for (const kind of BACKENDS) {
  t.test(`${kind.name}: each tier its quota, headers, registry and counters`, { skip: kind.skip }, async (t) => {
    const clock = manualClock(1_699_999_200_000)
    const backend = kind.make(t, clock.now)
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(admission, { backend, rateLimit: false })
    app.get('/api', { config: { admission: { rateLimit: { tiers: { ...TIERS.tiers, pro: [...TIERS.tiers.pro] }, tier: plan } } } }, async () => 'ok')
    const get = async (tier: string): Promise<[number, unknown, unknown]> => {
      const r = await app.inject({ url: '/api', headers: { 'x-plan': tier } })
      return [r.statusCode, r.headers['ratelimit-policy'], r.headers.ratelimit]
    }
    t.same(await get('free'), [200, '"free";q=1;w=60', '"free";r=0;t=60'])
    t.same(await get('free'), [429, '"free";q=1;w=60', '"free";r=0;t=60'])
    t.same(await get('pro'), [200, '"pro-per-1s";q=2;w=1, "pro-hour";q=100;w=3600', '"pro-per-1s";r=1;t=1, "pro-hour";r=99;t=3600'])
    t.same(await get('pro'), [200, '"pro-per-1s";q=2;w=1, "pro-hour";q=100;w=3600', '"pro-per-1s";r=0;t=1, "pro-hour";r=98;t=3600'])
    t.same(await get('pro'), [429, '"pro-per-1s";q=2;w=1, "pro-hour";q=100;w=3600', '"pro-per-1s";r=0;t=1, "pro-hour";r=98;t=3600'])
    const routes = app.admission.stats().routes
    t.match(routes['GET /api (tier free)'], { admitted: 1, limited: 1 })
    t.match(routes['GET /api (tier pro)'], { admitted: 2, limited: 1 })
    t.match(routes['GET /api'], { admitted: 0, limited: 0 }, 'the route itself counts what comes before the tier (shedding)')
    t.ok(await app.admission.registryOf('GET /api (tier free)')!.get('127.0.0.1'))
    t.equal(await app.admission.registryOf('GET /api (tier free)')!.delete('127.0.0.1'), true)
    t.equal((await get('free'))[0], 200, 'a fresh free quota; pro untouched')
    t.equal((await get('pro'))[0], 429)
  })
}

t.test('a tier the function does not declare, or a function that throws: 500 without internals, the permit back', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, {
    maxInFlight: 1,
    rateLimit: { tiers: { free: { limit: 5, windowMs: 1000 } }, tier: (request) => { if (request.headers['x-boom'] !== undefined) throw new Error('boom'); return request.headers['x-plan'] as string } }
  })
  app.get('/', async () => 'ok')
  const gold = await app.inject({ url: '/', headers: { 'x-plan': 'gold' } })
  t.equal(gold.statusCode, 500)
  t.match(gold.json(), { code: 'ADMISSION_UNKNOWN_TIER', message: 'Expected the `tier` function to return one of "free", got another name' })
  t.notMatch(gold.body, /gold/, 'the value, from the request, is not echoed')
  const boom = await app.inject({ url: '/', headers: { 'x-boom': '1' } })
  t.equal(boom.statusCode, 500)
  const none = await app.inject('/')
  t.equal(none.statusCode, 500)
  t.match(none.json(), { code: 'ADMISSION_UNKNOWN_TIER', message: /got undefined$/ })
  t.equal(app.admission.stats().inFlight, 0, 'each gave its permit back')
  t.equal((await app.inject({ url: '/', headers: { 'x-plan': 'free' } })).statusCode, 200)
  const error = new AdmissionTierError(undefined, ['a', 'b'])
  t.equal(error.message, 'Expected the `tier` function to return one of "a", "b", got undefined')
  t.equal(new AdmissionTierError(null, ['a']).message, 'Expected the `tier` function to return one of "a", got null')
})

t.test('plugin-level tiers: shared by the routes without their own, the 404 hook, and after authentication', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, {
    hook: 'preHandler',
    rateLimit: { tiers: { anonymous: { limit: 1, windowMs: 60_000 }, member: { limit: 3, windowMs: 60_000 } }, tier: (request) => (request as FastifyRequest & { member?: string }).member === undefined ? 'anonymous' : 'member' }
  })
  app.addHook('preHandler', async (request) => {
    if (request.headers.authorization === 'Bearer ok') (request as FastifyRequest & { member?: string }).member = 'ann'
  })
  app.get('/a', async () => 'ok')
  app.get('/b', async () => 'ok')
  app.setNotFoundHandler({ preHandler: app.admission.notFound }, async (_request, reply) => reply.code(404).send('none'))
  const auth = { authorization: 'Bearer ok' }
  t.equal((await app.inject('/a')).statusCode, 200)
  t.equal((await app.inject('/b')).statusCode, 429, 'the anonymous quota is shared')
  t.equal((await app.inject({ url: '/a', headers: auth })).headers['ratelimit-policy'], '"member";q=3;w=60')
  t.equal((await app.inject({ url: '/b', headers: auth })).statusCode, 200)
  t.equal((await app.inject({ url: '/nope', headers: auth })).statusCode, 404)
  t.equal((await app.inject({ url: '/nope', headers: auth })).statusCode, 429, 'the 404 hook takes from the tier too')
  t.match(app.admission.stats().routes, { '404 (tier member)': { admitted: 1, limited: 1 }, 'GET /a (tier anonymous)': { admitted: 1 } })
})

t.test('tiers are checked at registration', async (t) => {
  const invalid: Array<[unknown, string, RegExp]> = [
    [{ tiers: { free: { limit: 1, windowMs: 1 } } }, 'rateLimit.tier', /a synchronous function/],
    [{ tiers: { free: { limit: 1, windowMs: 1 } }, tier: async () => 'free' }, 'rateLimit.tier', /a synchronous function/],
    [{ tiers: {}, tier: plan }, 'rateLimit.tiers', /1 to 32 tiers/],
    [{ tiers: [], tier: plan }, 'rateLimit.tiers', /an object of tiers by name/],
    [{ tiers: null, tier: plan }, 'rateLimit.tiers', /an object of tiers by name/],
    [{ tiers: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`t${i}`, { limit: 1, windowMs: 1 }])), tier: plan }, 'rateLimit.tiers', /1 to 32 tiers/],
    [{ tiers: { Free: { limit: 1, windowMs: 1 } }, tier: plan }, 'rateLimit.tiers.Free', /a tier named as/],
    [{ tiers: { a: { tiers: {}, tier: plan } }, tier: plan }, 'rateLimit.tiers.a', /tiers do not nest/],
    [{ tiers: { a: { limit: -1, windowMs: 1 } }, tier: plan }, 'rateLimit.tiers.a.limit', /positive/],
    [{ tiers: { a: [] }, tier: plan }, 'rateLimit.tiers.a', /a list of 1 to 8/],
    [{ tiers: Object.defineProperty({}, 'a', { get: () => ({ limit: 1, windowMs: 1 }), enumerable: true }), tier: plan }, 'rateLimit.tiers.a', /an accessor property/],
    [{ tiers: { a: { limit: 1, windowMs: 1 } }, tier: plan, extra: 1 }, 'rateLimit.extra', /no other keys/]
  ]
  for (const [rateLimit, path, message] of invalid) {
    const app = Fastify()
    await t.rejects(async () => { await app.register(admission, { rateLimit: rateLimit as never }) }, { constructor: AdmissionOptionError, path, message }, path)
    await app.close()
  }
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: false })
  app.get('/g', { config: { admission: { groupId: 'g', rateLimit: TIERS as never } } }, async () => 'ok')
  await t.rejects(async () => { await app.ready() }, { path: 'config.admission of GET /g.groupId', message: /absent where the rate limit has tiers/ })
  const costly = Fastify()
  t.teardown(() => costly.close())
  await costly.register(admission, { rateLimit: TIERS as never })
  costly.get('/c', { config: { admission: { cost: 2 } } }, async () => 'ok')
  await t.rejects(async () => { await costly.ready() }, { path: 'config.admission of GET /c.cost', message: /at most the policy's capacity \(1, the least of its policies'\)/ })
})
