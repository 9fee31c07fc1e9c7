// `hook: 'preHandler'` (as @fastify/rate-limit's `hook`): the rate check runs after
// authentication, so `key(request)` can read `request.user`; shedding stays first, in onRequest,
// and a shed request takes no token (and reaches no authentication).
import t from 'tap'
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify'
import admission, { AdmissionOptionError, type AdmissionOptions } from '../../lib/index.js'
import { deferred, eventually, get, listen } from '../helpers/http.js'

declare module 'fastify' {
  interface FastifyRequest { user: { id: string } | null }
}

const ONE = { algorithm: 'fixed-window', limit: 1, windowMs: 60_000 } as const

function authenticate (calls: string[]) {
  return async function auth (request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const id = request.headers['x-user']
    calls.push(String(id))
    if (typeof id !== 'string') return reply.code(401).send({ error: 'who are you' })
    request.user = { id }
  }
}

t.test("per registration: the key reads request.user, set by the app's preHandler", async (t) => {
  const calls: string[] = []
  const app = Fastify()
  t.teardown(() => app.close())
  app.decorateRequest('user', null)
  await app.register(admission, { hook: 'preHandler', rateLimit: ONE, key: (request) => request.user!.id } satisfies AdmissionOptions)
  app.addHook('preHandler', authenticate(calls))
  app.get('/x', async (request) => `hello ${request.user!.id}`)
  // One address, two users: two quotas.
  t.equal((await app.inject({ url: '/x', headers: { 'x-user': 'ann' } })).body, 'hello ann')
  t.equal((await app.inject({ url: '/x', headers: { 'x-user': 'bob' } })).body, 'hello bob')
  const limited = await app.inject({ url: '/x', headers: { 'x-user': 'ann' } })
  t.equal(limited.statusCode, 429)
  t.ok(Number(limited.headers['retry-after']) >= 1)
  // Refused by authentication first: no token taken, the permit given back, not counted.
  t.equal((await app.inject('/x')).statusCode, 401)
  t.match(app.admission.stats(), { admitted: 2, limited: 1, inFlight: 0 })
  t.equal(await app.admission.registry.get('carl'), undefined)
})

t.test("per route: after the route's own preHandlers; other routes keep onRequest", async (t) => {
  const calls: string[] = []
  const app = Fastify()
  t.teardown(() => app.close())
  app.decorateRequest('user', null)
  await app.register(admission, { rateLimit: ONE, key: (request) => request.user?.id ?? request.ip })
  app.get('/me', { preHandler: [authenticate(calls)], config: { admission: { hook: 'preHandler' } } }, async (request) => request.user!.id)
  app.get('/open', { preHandler: authenticate(calls) }, async () => 'open')
  app.get('/one', { preHandler: authenticate(calls), config: { admission: { hook: 'preHandler' } } }, async (request) => request.user!.id)
  app.get('/free', { config: { admission: { hook: 'preHandler', rateLimit: false } } }, async () => 'free')
  t.equal((await app.inject({ url: '/me', headers: { 'x-user': 'ann' } })).statusCode, 200)
  t.equal((await app.inject({ url: '/me', headers: { 'x-user': 'bob' } })).statusCode, 200)
  t.equal((await app.inject({ url: '/me', headers: { 'x-user': 'ann' } })).statusCode, 429)
  // /open checks in onRequest, before authentication: keyed by the address; refused before auth runs.
  calls.length = 0
  t.equal((await app.inject({ url: '/open', headers: { 'x-user': 'ann' } })).statusCode, 200)
  t.equal((await app.inject({ url: '/open', headers: { 'x-user': 'bob' } })).statusCode, 429)
  t.same(calls, ['ann'], 'the refused request never reached authentication')
  t.equal((await app.inject({ url: '/one', headers: { 'x-user': 'cy' } })).statusCode, 200, 'a single preHandler of the route, then ours')
  t.equal((await app.inject({ url: '/one', headers: { 'x-user': 'cy' } })).statusCode, 429)
  for (let i = 0; i < 3; i++) t.equal((await app.inject('/free')).statusCode, 200, 'no rate limit: never limited')
  t.match(app.admission.stats().routes['GET /free'], { admitted: 3, limited: 0 }, 'but gated (counted)')
})

t.test('shedding stays first: a shed request reaches no preHandler and takes no token', async (t) => {
  const calls: string[] = []
  const app = Fastify()
  t.teardown(() => app.close())
  app.decorateRequest('user', null)
  await app.register(admission, { maxInFlight: 1, hook: 'preHandler', rateLimit: { limit: 2, windowMs: 60_000 }, key: (request) => request.user!.id })
  app.addHook('preHandler', authenticate(calls))
  const hold = deferred()
  const entered = deferred()
  app.get('/slow', async () => { entered.resolve(); await hold.promise; return 'slow' })
  app.get('/x', async () => 'ok')
  const port = await listen(app)
  const slow = get(port, '/slow', { 'x-user': 'ann' })
  await entered.promise
  for (let i = 0; i < 3; i++) {
    const shed = await get(port, '/x', { 'x-user': 'ann' })
    t.equal(shed.status, 503)
    t.equal(shed.headers['retry-after'], '1')
    t.equal(shed.headers.ratelimit, '"in-flight";r=0', 'the in-flight policy, not the quota: no token taken')
  }
  t.same(calls, ['ann'], 'only the slow request was authenticated')
  hold.resolve()
  await slow
  t.ok(await eventually(() => app.admission.stats().inFlight === 0))
  t.equal((await get(port, '/x', { 'x-user': 'ann' })).status, 200, 'the second of two tokens: the shed ones took none')
  t.equal((await get(port, '/x', { 'x-user': 'ann' })).status, 429)
  t.match(app.admission.stats(), { shed: 3, admitted: 2, limited: 1 })
})

t.test('hook is checked: onRequest or preHandler, at registration and per route', async (t) => {
  const app = Fastify()
  const error = await app.register(admission, { hook: 'onSend' } as never).ready().then(() => undefined, (e: unknown) => e)
  t.type(error, AdmissionOptionError)
  t.match(error, { path: 'hook', value: 'onSend', message: "Expected `hook` to be 'onRequest' or 'preHandler', got 'onSend' (string)" })
  await app.close()
  const route = Fastify()
  await route.register(admission)
  route.get('/x', { config: { admission: { hook: 'preValidation' as never } } }, async () => 'ok')
  t.match(await route.ready().then(() => undefined, (e: unknown) => e), { path: 'config.admission of GET /x.hook', value: 'preValidation' })
  await route.close()
})
