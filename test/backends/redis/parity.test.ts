// The @fastify/rate-limit parity options on a real Redis, where the state is: a route group's one
// quota shared by its routes and by two apps (two processes of one application), the check in
// preHandler keyed by the authenticated user, shadow mode consuming and counting without refusing,
// an allowed client leaving no state, and a builder's refusal after a round trip.
import t from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import type { Redis } from 'ioredis'
import admission, { redisBackend, type AdmissionOptions } from '../../../lib/index.js'
import { deleteKeys, sharedRedis, uniquePrefix } from './helpers.js'

declare module 'fastify' {
  interface FastifyRequest { member: string | null }
}

const shared = await sharedRedis()
const skip = 'skip' in shared ? shared.skip : false
const redis = 'redis' in shared ? shared.redis : (undefined as unknown as Redis)
if (!skip) t.teardown(() => redis.quit())

const TWO = { algorithm: 'fixed-window', limit: 2, windowMs: 60_000 } as const

async function redisApp (prefix: string, options: AdmissionOptions, routes: (app: FastifyInstance) => void): Promise<FastifyInstance> {
  const app = Fastify()
  app.decorateRequest('member', null)
  await app.register(admission, { backend: redisBackend({ client: redis, prefix, timeoutMs: 2000 }), rateLimit: TWO, ...options })
  routes(app)
  await app.ready()
  return app
}

t.test('a group on Redis: its routes, in two apps, take from one quota', { skip }, async (t) => {
  const prefix = uniquePrefix('group')
  t.teardown(() => deleteKeys(redis, prefix))
  const routes = (app: FastifyInstance): void => {
    app.get('/search', { config: { admission: { groupId: 'search' } } }, async () => 'ok')
    app.get('/suggest', { config: { admission: { groupId: 'search' } } }, async () => 'ok')
    app.get('/other', async () => 'ok')
  }
  const a = await redisApp(prefix, {}, routes)
  const b = await redisApp(prefix, {}, routes)
  t.teardown(async () => { await a.close(); await b.close() })
  t.equal((await a.inject('/search')).statusCode, 200)
  t.equal((await b.inject('/suggest')).statusCode, 200)
  t.equal((await a.inject('/suggest')).statusCode, 429, 'the group had two units, across both apps')
  t.equal((await b.inject('/search')).statusCode, 429)
  t.equal((await b.inject('/other')).statusCode, 200, "the plugin's own quota is another")
  const keys = (await redis.keys(`${prefix}*`)).sort()
  t.equal(keys.length, 2)
  t.ok(keys.some((key) => key.includes('#admission:group%3Asearch:')), `the group's quota has its own address: ${keys.join(', ')}`)
})

t.test('preHandler on Redis: keyed by the authenticated member', { skip }, async (t) => {
  const prefix = uniquePrefix('prehandler')
  t.teardown(() => deleteKeys(redis, prefix))
  const app = await redisApp(prefix, { hook: 'preHandler', key: (request) => request.member! }, (app) => {
    app.addHook('preHandler', async (request) => { request.member = String(request.headers['x-member']) })
    app.get('/x', async (request) => request.member)
  })
  t.teardown(() => app.close())
  for (const member of ['ann', 'ann', 'bob', 'bob']) t.equal((await app.inject({ url: '/x', headers: { 'x-member': member } })).statusCode, 200, member)
  const limited = await app.inject({ url: '/x', headers: { 'x-member': 'ann' } })
  t.equal(limited.statusCode, 429)
  t.ok(Number(limited.headers['retry-after']) >= 1)
  t.ok(await app.admission.registry.get('ann'), "ann's state, under her name")
  t.equal(await app.admission.registry.get('127.0.0.1'), undefined, 'nothing under the address')
})

t.test('shadow mode on Redis: consumed and counted, never refused', { skip }, async (t) => {
  const prefix = uniquePrefix('shadow')
  t.teardown(() => deleteKeys(redis, prefix))
  const app = await redisApp(prefix, { enforce: false }, (app) => { app.get('/x', async () => 'ok') })
  t.teardown(() => app.close())
  for (let i = 0; i < 5; i++) {
    const res = await app.inject('/x')
    t.equal(res.statusCode, 200)
    t.match(res.headers.ratelimit, new RegExp(`^"default";r=${Math.max(0, 1 - i)};t=\\d+$`))
  }
  t.match(app.admission.stats(), { admitted: 5, limited: 0, wouldLimit: 3 })
})

t.test('an allowed client leaves no state on Redis; a builder refuses after the round trip', { skip }, async (t) => {
  const prefix = uniquePrefix('allow')
  t.teardown(() => deleteKeys(redis, prefix))
  const app = await redisApp(prefix, {
    allowList: ['192.0.2.0/24'],
    errorResponseBuilder: (_request, context) => ({ statusCode: context.statusCode, code: 'slow_down', wait: context.retryAfterSeconds })
  }, (app) => { app.get('/x', async () => 'ok') })
  t.teardown(() => app.close())
  for (let i = 0; i < 4; i++) t.equal((await app.inject({ url: '/x', remoteAddress: '192.0.2.9' })).statusCode, 200)
  t.same(await redis.keys(`${prefix}*`), [], 'no key for the allowed client')
  for (let i = 0; i < 2; i++) t.equal((await app.inject({ url: '/x', remoteAddress: '198.51.100.9' })).statusCode, 200)
  const refused = await app.inject({ url: '/x', remoteAddress: '198.51.100.9' })
  t.equal(refused.statusCode, 429)
  const wait = Number(refused.headers['retry-after'])
  t.ok(wait >= 1 && wait <= 60)
  t.same(refused.json(), { statusCode: 429, code: 'slow_down', wait })
  t.match(app.admission.stats(), { allowed: 4, admitted: 6, limited: 1 })
})
