// Shadow mode (`enforce: false`, globally or per route): the gate decides, consumes, counts, logs
// and sets the RateLimit headers as configured, but never refuses; stats() counts what would have
// been refused (`wouldLimit`, `wouldShed`).
import t from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import { Writable } from 'node:stream'
import admission, { AdmissionOptionError, memoryBackend, type AdmissionOptions } from '../../lib/index.js'
import { deferred, eventually, get, listen } from '../helpers/http.js'

const clock = (): number => 1_700_000_000_000
const ONE = { algorithm: 'fixed-window', limit: 1, windowMs: 60_000 } as const

async function appWith (options: AdmissionOptions): Promise<{ app: FastifyInstance, logs: Array<Record<string, unknown>> }> {
  const logs: Array<Record<string, unknown>> = []
  const stream = new Writable({ write (chunk: Buffer, _encoding, done) { logs.push(JSON.parse(chunk.toString()) as Record<string, unknown>); done() } })
  const app = Fastify({ logger: { level: 'info', stream } })
  await app.register(admission, { backend: memoryBackend({ clock }), rateLimit: ONE, ...options })
  return { app, logs }
}

const wouldHave = (logs: Array<Record<string, unknown>>): Array<Record<string, unknown>> =>
  logs.filter((line) => /would have refused/.test(String(line.msg)))

t.test('enforce: false: over the quota, answered 200 with the headers; counted and logged, onLimit not called', async (t) => {
  const limits: number[] = []
  const { app, logs } = await appWith({ enforce: false, onLimit: (_r, ms) => { limits.push(ms) } })
  t.teardown(() => app.close())
  app.get('/x', async () => 'ok')
  t.equal((await app.inject('/x')).statusCode, 200)
  for (let i = 0; i < 3; i++) {
    const res = await app.inject('/x')
    t.equal(res.statusCode, 200)
    t.equal(res.body, 'ok')
    t.equal(res.headers.ratelimit, '"default";r=0;t=40', 'the headers as configured')
    t.equal(res.headers['ratelimit-policy'], '"default";q=1;w=60')
    t.notOk('retry-after' in res.headers, 'not a refusal')
  }
  t.match(app.admission.stats(), { admitted: 4, limited: 0, wouldLimit: 3, wouldShed: 0, routes: { 'GET /x': { wouldLimit: 3, admitted: 4 } } })
  t.same(limits, [])
  const lines = wouldHave(logs)
  t.equal(lines.length, 3)
  t.match(lines[0], { level: 30, route: 'GET /x', reason: 'limited', retryAfterSeconds: 40, reqId: String })
})

t.test('enforce: false with a full gate: the request goes on holding no permit, takes its token, counted', async (t) => {
  const { app, logs } = await appWith({ enforce: false, maxInFlight: 1, rateLimit: { algorithm: 'fixed-window', limit: 5, windowMs: 60_000 } })
  t.teardown(() => app.close())
  const hold = deferred()
  const entered = deferred()
  app.get('/slow', async () => { entered.resolve(); await hold.promise; return 'slow' })
  app.get('/x', async () => 'ok')
  const port = await listen(app)
  const slow = get(port, '/slow')
  await entered.promise
  const over = await get(port, '/x')
  t.equal(over.status, 200)
  t.equal(over.headers.ratelimit, '"default";r=3;t=40', 'the rate check ran: two of five taken')
  t.equal(app.admission.stats().inFlight, 1, 'the gauge counts what the gate would hold')
  hold.resolve()
  await slow
  t.ok(await eventually(() => app.admission.stats().inFlight === 0))
  t.match(app.admission.stats(), { shed: 0, wouldShed: 1, admitted: 2 })
  t.match(wouldHave(logs), [{ reason: 'shed', route: 'GET /x', retryAfterSeconds: 1 }])
})

t.test('enforce: false when the backend cannot decide: admitted, counted unavailable, logged once as admitting', async (t) => {
  const { app, logs } = await appWith({ enforce: false, backend: memoryBackend({ clock, maxIdentities: 1 }), key: (r) => String(r.headers['x-id']) })
  t.teardown(() => app.close())
  app.get('/x', async () => 'ok')
  t.equal((await app.inject({ url: '/x', headers: { 'x-id': 'a' } })).statusCode, 200)
  for (let i = 0; i < 2; i++) t.equal((await app.inject({ url: '/x', headers: { 'x-id': 'b' } })).statusCode, 200)
  t.match(app.admission.stats(), { unavailable: 2, admitted: 3, shed: 0 })
  t.match(logs.filter((line) => line.level === 50), [{ msg: /could not decide for GET \/x .*; admitting \(enforce: false\) until it can/ }])
})

t.test('per route: shadow on one route of an enforcing plugin, and enforcing on one of a shadow plugin', async (t) => {
  const { app } = await appWith({})
  t.teardown(() => app.close())
  app.get('/dry', { config: { admission: { enforce: false, rateLimit: ONE } } }, async () => 'ok')
  app.get('/wet', { config: { admission: { rateLimit: ONE } } }, async () => 'ok')
  for (let i = 0; i < 2; i++) await app.inject('/dry')
  t.equal((await app.inject('/dry')).statusCode, 200)
  await app.inject('/wet')
  t.equal((await app.inject('/wet')).statusCode, 429)
  t.match(app.admission.stats().routes, { 'GET /dry': { wouldLimit: 2, limited: 0 }, 'GET /wet': { limited: 1, wouldLimit: 0 } })

  const shadow = (await appWith({ enforce: false })).app
  t.teardown(() => shadow.close())
  shadow.get('/wet', { config: { admission: { enforce: true } } }, async () => 'ok')
  await shadow.inject('/wet')
  t.equal((await shadow.inject('/wet')).statusCode, 429)
})

t.test('shadow with the check in preHandler, with an allow list (before shedding too), and on the 404 hook', async (t) => {
  for (const options of [{ hook: 'preHandler' }, { allowList: ['10.0.0.1'] }, { allowList: { clients: ['10.0.0.1'], skipsShedding: true } }] as AdmissionOptions[]) {
    const { app } = await appWith({ enforce: false, maxInFlight: 1, ...options })
    t.teardown(() => app.close())
    app.setNotFoundHandler({ preHandler: app.admission.notFound }, async (_request, reply) => reply.code(404).send('no'))
    const hold = deferred()
    const entered = deferred()
    app.get('/slow', async () => { entered.resolve(); await hold.promise; return 'slow' })
    app.get('/x', async () => 'ok')
    await app.ready()
    const slow = app.inject({ url: '/slow', remoteAddress: '10.0.0.9' })
    await entered.promise
    t.equal((await app.inject({ url: '/x', remoteAddress: '10.0.0.9' })).statusCode, 200, `${JSON.stringify(options)}: would shed, and would limit`)
    t.equal((await app.inject({ url: '/x', remoteAddress: '10.0.0.1' })).statusCode, 200)
    t.equal((await app.inject({ url: '/nope', remoteAddress: '10.0.0.9' })).statusCode, 404, 'the 404 hook lets it on too')
    hold.resolve()
    await slow
    const stats = app.admission.stats()
    const allowed = options.allowList === undefined ? 0 : 1
    t.match(stats, { wouldShed: typeof options.allowList === 'object' && 'skipsShedding' in options.allowList ? 2 : 3, wouldLimit: 2, allowed, limited: 0, shed: 0 }, JSON.stringify(options))
  }
})

t.test('enforce is a boolean, at registration and per route', async (t) => {
  const app = Fastify()
  const error = await app.register(admission, { enforce: 'no' } as never).ready().then(() => undefined, (e: unknown) => e)
  t.type(error, AdmissionOptionError)
  t.match(error, { path: 'enforce', message: "Expected `enforce` to be a boolean, got 'no' (string)" })
  await app.close()
  const route = Fastify()
  await route.register(admission)
  route.get('/x', { config: { admission: { enforce: 0 as never } } }, async () => 'ok')
  t.match(await route.ready().then(() => undefined, (e: unknown) => e), { path: 'config.admission of GET /x.enforce', value: 0 })
  await route.close()
})

t.test('shadow without a rate limit: a full gate lets requests on; the 404 hook too, full or not', async (t) => {
  const { app } = await appWith({ enforce: false, maxInFlight: 1, rateLimit: false })
  t.teardown(() => app.close())
  app.setNotFoundHandler({ preHandler: app.admission.notFound }, async (_request, reply) => reply.code(404).send('no'))
  const hold = deferred()
  const entered = deferred()
  app.get('/slow', async () => { entered.resolve(); await hold.promise; return 'slow' })
  app.get('/x', async () => 'ok')
  await app.ready()
  t.equal((await app.inject('/nope')).statusCode, 404)
  const slow = app.inject('/slow')
  await entered.promise
  t.equal((await app.inject('/x')).statusCode, 200)
  t.equal((await app.inject('/nope')).statusCode, 404)
  hold.resolve()
  await slow
  t.match(app.admission.stats(), { wouldShed: 2, admitted: 4 })
  const limited = (await appWith({ enforce: false })).app
  t.teardown(() => limited.close())
  limited.setNotFoundHandler({ preHandler: limited.admission.notFound }, async (_request, reply) => reply.code(404).send('no'))
  for (let i = 0; i < 2; i++) t.equal((await limited.inject('/nope')).statusCode, 404)
  t.match(limited.admission.stats().routes['404'], { admitted: 2, wouldLimit: 1 })
})
