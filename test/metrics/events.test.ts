import t from 'tap'
import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import { Writable } from 'node:stream'
import Fastify, { type FastifyInstance } from 'fastify'
import admission, { DECISION_CHANNEL, memoryBackend, type AdmissionDecisionEvent, type AdmissionOptions } from '../../lib/index.js'
import { decisions } from '../../lib/metrics/events.js'
import type { Teardown } from '../helpers/http.js'
import { decision, scriptedBackend } from '../helpers/metrics.js'

/** Collects the decisions published while `t` runs. */
function listen (t: Teardown): AdmissionDecisionEvent[] {
  const seen: AdmissionDecisionEvent[] = []
  const listener = (message: unknown): void => { seen.push(message as AdmissionDecisionEvent) }
  subscribe(DECISION_CHANNEL, listener)
  t.teardown(() => { unsubscribe(DECISION_CHANNEL, listener) })
  return seen
}

/** The event without its request, for comparison. */
function plain ({ request, ...rest }: AdmissionDecisionEvent): Omit<AdmissionDecisionEvent, 'request'> {
  return rest
}

async function appWith (t: Teardown, options: AdmissionOptions, logs?: Array<Record<string, unknown>>, level = 'debug'): Promise<FastifyInstance> {
  const stream = new Writable({ write (chunk, _encoding, done) { logs?.push(JSON.parse(String(chunk)) as Record<string, unknown>); done() } })
  const app = Fastify(logs === undefined ? {} : { logger: { level, stream } })
  t.teardown(() => app.close())
  await app.register(admission, options)
  return app
}

t.test('the channel name, and nothing published while nobody listens', async (t) => {
  t.equal(DECISION_CHANNEL, 'fastify-admission:decision')
  t.equal(decisions.name, DECISION_CHANNEL)
  const app = await appWith(t, { maxInFlight: 1, rateLimit: { limit: 1, windowMs: 60_000 } })
  app.get('/a', async () => 'ok')
  t.equal(decisions.hasSubscribers, false)
  await app.inject('/a')
  await app.inject('/a')
  const seen = listen(t)
  await app.inject('/a')
  t.equal(seen.length, 1, 'the decisions made before anyone listened are not delivered later')
})

t.test('memory: one event per decision, with route, outcome, status, Retry-After and the key', async (t) => {
  const seen = listen(t)
  const app = await appWith(t, { maxInFlight: 1, rateLimit: { limit: 1, windowMs: 60_000 }, key: (request) => String(request.headers['x-client']) })
  let release: () => void = () => {}
  const gate = new Promise<void>((resolve) => { release = resolve })
  app.get('/a', async () => 'ok')
  app.get('/free', { config: { admission: { rateLimit: false } } }, async () => { await gate; return 'free' })
  app.setNotFoundHandler({ preHandler: app.admission.notFound }, async (_request, reply) => reply.code(404).send('none'))
  const alice = { 'x-client': 'alice' }
  await app.inject({ url: '/a', headers: alice })
  await app.inject({ url: '/a', headers: alice })
  await app.inject({ url: '/nowhere', headers: { 'x-client': 'bob' } })
  const held = app.inject('/free')
  await new Promise((resolve) => setImmediate(resolve))
  await app.inject({ url: '/a', headers: { 'x-client': 'carol' } })
  release()
  await held
  t.same(seen.map(plain), [
    { registration: 'app', route: 'GET /a', outcome: 'admitted', reason: undefined, status: undefined, retryAfterSeconds: undefined, key: 'alice', backendFailed: false },
    { registration: 'app', route: 'GET /a', outcome: 'limited', reason: 'quota:default', status: 429, retryAfterSeconds: 60, key: 'alice', backendFailed: false },
    { registration: 'app', route: '404', outcome: 'admitted', reason: undefined, status: undefined, retryAfterSeconds: undefined, key: 'bob', backendFailed: false },
    { registration: 'app', route: 'GET /free', outcome: 'admitted', reason: undefined, status: undefined, retryAfterSeconds: undefined, key: undefined, backendFailed: false },
    { registration: 'app', route: 'GET /a', outcome: 'shed', reason: 'in-flight', status: 503, retryAfterSeconds: 1, key: undefined, backendFailed: false }
  ])
  t.equal(seen[0]!.request.url, '/a', 'the request itself, for its id, its route, its user')
  t.equal(seen[2]!.request.url, '/nowhere')
})

t.test('a backend that cannot decide: unavailable (deny) or admitted with backendFailed (allow)', async (t) => {
  for (const onBackendError of ['deny', 'allow'] as const) {
    t.test(onBackendError, async (t) => {
      const seen = listen(t)
      const script = [decision(true), Promise.reject(new Error('down')), decision(false, 1500)]
      const app = await appWith(t, { backend: scriptedBackend(() => script.shift()), onBackendError })
      app.get('/r', async () => 'ok')
      for (let i = 0; i < 3; i++) await app.inject('/r')
      t.same(seen.map((e) => [e.outcome, e.reason, e.status, e.retryAfterSeconds, e.backendFailed]), [
        ['admitted', undefined, undefined, undefined, false],
        onBackendError === 'deny' ? ['unavailable', 'backend-unavailable', 503, 1, true] : ['admitted', undefined, undefined, undefined, true],
        ['limited', 'quota:default', 429, 2, false]
      ])
      t.ok(seen.every((e) => e.key === '127.0.0.1'), 'the default key: the address')
    })
  }
})

t.test('memory full of live state: unavailable, with the key', async (t) => {
  const seen = listen(t)
  const app = await appWith(t, { backend: memoryBackend({ maxIdentities: 1 }), rateLimit: { limit: 1, windowMs: 60_000 }, key: (request) => String(request.headers['x-client']) })
  app.get('/a', async () => 'ok')
  await app.inject({ url: '/a', headers: { 'x-client': 'one' } })
  t.equal((await app.inject({ url: '/a', headers: { 'x-client': 'two' } })).statusCode, 503)
  t.match(seen.map(plain)[1], { outcome: 'unavailable', reason: 'backend-unavailable', status: 503, key: 'two', backendFailed: true })
})

t.test('refusals are logged at debug on the request\'s logger; admissions are not', async (t) => {
  const logs: Array<Record<string, unknown>> = []
  const app = await appWith(t, { maxInFlight: 1, rateLimit: { limit: 1, windowMs: 60_000 }, backend: undefined }, logs)
  let release: () => void = () => {}
  const gate = new Promise<void>((resolve) => { release = resolve })
  app.get('/a', async () => 'ok')
  app.get('/hold', { config: { admission: { rateLimit: false } } }, async () => { await gate; return 'held' })
  await app.inject('/a')
  await app.inject('/a')
  const held = app.inject('/hold')
  await new Promise((resolve) => setImmediate(resolve))
  await app.inject('/a')
  release()
  await held
  const ours = logs.filter((line) => String(line.msg).startsWith('fastify-admission:'))
  t.same(ours.map((line) => [line.level, line.route, line.outcome, line.reason, line.status, line.retryAfterSeconds]), [
    [20, 'GET /a', 'limited', 'quota:default', 429, 60],
    [20, 'GET /a', 'shed', 'in-flight', 503, 1]
  ])
  t.match(ours[0], { reqId: /.+/, msg: 'fastify-admission: limited (quota:default), answered 429 with Retry-After 60' })
})

t.test('with debug off, refusals log nothing; a backend failure is still logged once at error', async (t) => {
  const logs: Array<Record<string, unknown>> = []
  const app = await appWith(t, { backend: scriptedBackend(() => Promise.reject(new Error('down'))) }, logs, 'info')
  app.get('/r', async () => 'ok')
  await app.inject('/r')
  await app.inject('/r')
  const ours = logs.filter((line) => String(line.msg).startsWith('fastify-admission:'))
  t.same(ours.map((line) => line.level), [50])
  t.match(ours[0], { route: 'GET /r', msg: /could not decide for GET \/r/ })
})

t.test('a route\'s logLevel applies to its refusals', async (t) => {
  const logs: Array<Record<string, unknown>> = []
  const app = await appWith(t, { rateLimit: { limit: 1, windowMs: 60_000 } }, logs, 'info')
  app.get('/quiet', async () => 'ok')
  app.get('/loud', { logLevel: 'debug' }, async () => 'ok')
  for (const url of ['/quiet', '/quiet', '/loud', '/loud']) await app.inject(url)
  const ours = logs.filter((line) => String(line.msg).startsWith('fastify-admission:'))
  t.same(ours.map((line) => line.route), ['GET /loud', 'GET /loud'], 'the shared quota refuses both /loud requests; only that route logs at debug')
})
