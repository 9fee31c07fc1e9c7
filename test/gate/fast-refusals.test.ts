// Refusals written from precomputed bytes (`refusal: { fast }`): the same status, headers and body as
// through Fastify's reply, what the application's hooks see on each path, and the wire — keep-alive,
// the order of pipelined responses, HTTP/2 — on real sockets.
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import { connect as connectH2 } from 'node:http2'
import { Writable } from 'node:stream'
import { channel } from 'node:diagnostics_channel'
import admission, { AdmissionOptionError, memoryBackend, type AdmissionOptions } from '../../lib/index.js'
import { deferred, listen } from '../helpers/http.js'
import { rawSocket, statuses } from '../helpers/raw.js'

const FIXED = { algorithm: 'fixed-window', limit: 1, windowMs: 60_000 } as const
const clock = (): number => 1_700_000_010_000
// Every gated request is shed: the health check fails from the first sample on.
const SHED_ALL = { healthCheck: async () => false, healthCheckInterval: 60_000, retryAfter: 60 }

interface Seen { onSend: number[], onResponse: number[], errorHandler: number, logs: Array<Record<string, unknown>> }

/** An app with hooks that record what they see, and its log lines. */
async function app (t: Test, options: AdmissionOptions, server: FastifyServerOptions = {}): Promise<{ app: FastifyInstance, seen: Seen }> {
  const seen: Seen = { onSend: [], onResponse: [], errorHandler: 0, logs: [] }
  const stream = new Writable({ write (chunk: Buffer, _encoding, done) { seen.logs.push(JSON.parse(chunk.toString()) as Record<string, unknown>); done() } })
  const fastify = Fastify({ logger: { level: 'info', stream }, ...server })
  t.teardown(() => fastify.close())
  // An application's own hook before the gate's: a header every answer should carry (as CORS does).
  fastify.addHook('onRequest', async (_request, reply) => { reply.header('access-control-allow-origin', '*') })
  fastify.addHook('onSend', async (_request, reply, payload) => { seen.onSend.push(reply.statusCode); return payload })
  fastify.addHook('onResponse', async (_request, reply) => { seen.onResponse.push(reply.statusCode) })
  fastify.setErrorHandler((error, _request, reply) => { seen.errorHandler++; return reply.send(error) })
  await fastify.register(admission, { backend: memoryBackend({ clock }), rateLimit: FIXED, ...options })
  fastify.get('/', async () => 'ok')
  return { app: fastify, seen }
}

/** What a client can compare of two answers: status, body and every header but the date. */
function visible (response: { statusCode: number, headers: Record<string, unknown>, body: string }): object {
  const { date: _date, ...headers } = response.headers
  return { status: response.statusCode, headers, body: response.body }
}

t.test('a shed is written from precomputed bytes by default: the same answer as through the reply, no onSend, no error handler; onResponse and the request log see it', async (t) => {
  const fast = await app(t, { pressure: SHED_ALL })
  const slow = await app(t, { pressure: SHED_ALL, refusal: { fast: false } })
  await fast.app.ready()
  await slow.app.ready()
  const a = await fast.app.inject('/')
  const b = await slow.app.inject('/')
  t.equal(a.statusCode, 503)
  t.equal(a.headers['retry-after'], '60')
  t.equal(a.headers['access-control-allow-origin'], '*', 'headers the application set before the gate are sent')
  t.same(a.json(), { statusCode: 503, error: 'Service Unavailable', message: 'Server is under pressure, retry in 60 seconds' })
  t.same(visible(a), visible(b), 'byte for byte the answer sent through Fastify\'s reply')
  t.same(fast.seen.onSend, [], 'no onSend hook ran for the fast shed')
  t.same(slow.seen.onSend, [503], 'refusal: { fast: false } — onSend sees the shed')
  t.same(fast.seen.onResponse, [503], 'onResponse sees the fast shed')
  t.equal(fast.seen.errorHandler, 0)
  t.ok(fast.seen.logs.some((line) => line.msg === 'request completed' && (line.res as { statusCode: number }).statusCode === 503), 'the request log has it')
  t.equal(fast.app.admission.stats().shed, 1, 'counted as shed')
})

t.test('rate-limit refusals go through the reply by default; refusal: { fast: \'all\' } writes them from bytes too, RateLimit fields included', async (t) => {
  const byDefault = await app(t, {})
  const all = await app(t, { refusal: { fast: 'all' } })
  for (const { app: a } of [byDefault, all]) t.equal((await a.inject('/')).statusCode, 200)
  const a = await byDefault.app.inject('/')
  const b = await all.app.inject('/')
  t.equal(b.statusCode, 429)
  t.equal(b.headers.ratelimit, '"default";r=0;t=30')
  t.equal(b.headers['ratelimit-policy'], '"default";q=1;w=60')
  t.equal(b.headers['retry-after'], '30')
  t.same(visible(a), visible(b), 'the same answer on both paths')
  t.same(byDefault.seen.onSend, [200, 429], 'by default onSend sees the 429')
  t.same(all.seen.onSend, [200], 'with \'all\' it does not')
  t.same(all.seen.onResponse, [200, 429])
  t.equal(all.app.admission.stats().limited, 1)
})

t.test('every built-in body style is the same on both paths (shed and limited)', async (t) => {
  for (const responseBody of ['json', 'text', 'problem'] as const) {
    for (const pressure of [SHED_ALL, undefined]) {
      const fast = await app(t, { refusal: { body: responseBody, fast: 'all' }, ...(pressure === undefined ? {} : { pressure }) })
      const slow = await app(t, { refusal: { body: responseBody, fast: false }, ...(pressure === undefined ? {} : { pressure }) })
      await fast.app.ready()
      await slow.app.ready()
      if (pressure === undefined) {
        await fast.app.inject('/')
        await slow.app.inject('/')
      }
      const a = await fast.app.inject('/')
      const b = await slow.app.inject('/')
      t.equal(a.statusCode, pressure === undefined ? 429 : 503, `${responseBody}, ${pressure === undefined ? 'limited' : 'shed'}`)
      t.same(visible(a), visible(b), `${responseBody}, ${pressure === undefined ? 'limited' : 'shed'}: the same answer`)
    }
  }
})

t.test('HEAD: the fast shed has its headers and no body', async (t) => {
  const { app: a } = await app(t, { pressure: SHED_ALL })
  await a.ready()
  const head = await a.inject({ method: 'HEAD', url: '/' })
  t.equal(head.statusCode, 503)
  t.equal(head.body, '')
  t.equal(head.headers['retry-after'], '60')
})

t.test('a route with an errorResponseBuilder refuses through it, on the error handler\'s path, for sheds too', async (t) => {
  const { app: a, seen } = await app(t, { pressure: SHED_ALL, errorResponseBuilder: (_request, context) => ({ statusCode: context.statusCode, message: `busy, ${context.after}` }) })
  await a.ready()
  const shed = await a.inject('/')
  t.equal(shed.statusCode, 503)
  t.equal(shed.headers['retry-after'], '60')
  t.match(shed.json(), { message: 'busy, 60 seconds' })
  t.equal(seen.errorHandler, 1)
  t.same(seen.onSend, [503])
})

t.test('the decision event and onShed still hear a fast shed', async (t) => {
  const events: unknown[] = []
  const listener = (message: unknown): void => { events.push(message) }
  channel('fastify-admission:decision').subscribe(listener)
  t.teardown(() => { channel('fastify-admission:decision').unsubscribe(listener) })
  let onShed = 0
  const { app: a } = await app(t, { pressure: SHED_ALL, onShed: () => { onShed++ } })
  await a.ready()
  t.equal((await a.inject('/')).statusCode, 503)
  t.equal(onShed, 1)
  t.equal(events.length, 1)
  t.match(events[0], { outcome: 'shed', status: 503, retryAfterSeconds: 60, route: 'GET /' })
})

t.test('refusal.fast: anything else is refused at registration, naming the values', async (t) => {
  const a = Fastify()
  t.teardown(() => a.close())
  const error = await a.register(admission, { refusal: { fast: 'yes' } as never }).then(() => undefined, (e: unknown) => e)
  t.ok(error instanceof AdmissionOptionError)
  t.match(error, { code: 'ADMISSION_INVALID_OPTION', path: 'refusal.fast', message: /`refusal.fast`.*'shed' \(the default\), 'all' or false.*got 'yes'/ })
})

t.test('pipelined on one keep-alive socket: a fast shed waits its turn behind the answer before it', async (t) => {
  const a = Fastify()
  t.teardown(() => a.close())
  await a.register(admission, { maxInFlight: 1, rateLimit: false })
  const hold = deferred()
  const entered = deferred()
  a.get('/slow', async () => { entered.resolve(); await hold.promise; return 'slow' })
  a.get('/fast', async () => 'fast')
  const port = await listen(a)
  const { socket, received } = await rawSocket(port)
  t.teardown(() => socket.destroy())
  const GET = (path: string): string => `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`
  socket.write(GET('/slow') + GET('/fast') + GET('/fast'))
  await entered.promise
  // /slow holds the only slot: both /fast are shed while it runs, and their answers wait for it.
  await new Promise((resolve) => setTimeout(resolve, 50))
  t.equal(received(), '', 'nothing written ahead of the first answer')
  hold.resolve()
  await new Promise<void>((resolve) => { const check = (): void => { if (statuses(received()).length === 3) resolve(); else setTimeout(check, 5) }; check() })
  t.same(statuses(received()), [200, 503, 503], 'in the order asked')
  t.match(received(), /slow[\s\S]*Server is at capacity[\s\S]*Server is at capacity/)
  // The connection is still usable: a fourth request on it is answered.
  socket.write(GET('/fast'))
  await new Promise<void>((resolve) => { const check = (): void => { if (statuses(received()).length === 4) resolve(); else setTimeout(check, 5) }; check() })
  t.equal(statuses(received())[3], 200, 'keep-alive holds')
  t.equal(a.admission.stats().shed, 2)
  socket.destroy()
})

t.test('HTTP/2: the fast shed is written through the compatibility layer', async (t) => {
  // Typed as an HTTP/1 app for `listen` (which reads only the address).
  const a = Fastify({ http2: true }) as unknown as FastifyInstance
  t.teardown(() => a.close())
  await a.register(admission, { rateLimit: false, pressure: SHED_ALL })
  a.get('/', async () => 'ok')
  const port = await listen(a)
  const session = connectH2(`http://127.0.0.1:${port}`)
  t.teardown(() => session.close())
  const answer = await new Promise<{ status: number, retryAfter: unknown, body: string }>((resolve, reject) => {
    const stream = session.request({ ':path': '/' })
    let body = ''
    let status = 0
    let retryAfter: unknown
    stream.on('response', (headers) => { status = Number(headers[':status']); retryAfter = headers['retry-after'] })
    stream.setEncoding('utf8')
    stream.on('data', (chunk: string) => { body += chunk })
    stream.on('end', () => { resolve({ status, retryAfter, body }) })
    stream.on('error', reject)
    stream.end()
  })
  t.equal(answer.status, 503)
  t.equal(answer.retryAfter, '60')
  t.match(JSON.parse(answer.body), { statusCode: 503, message: 'Server is under pressure, retry in 60 seconds' })
})
