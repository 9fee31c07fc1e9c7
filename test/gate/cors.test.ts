// Browsers read the gate's answers across origins: with @fastify/cors (or the application) setting
// Access-Control-Allow-Origin, Retry-After and the RateLimit fields are exposed to the page's code
// on refusals and admissions alike, with no option needed. Real sockets, the real plugin.
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import cors, { type FastifyCorsOptions } from '@fastify/cors'
import admission from '../../lib/index.js'
import type { AdmissionOptions } from '../../lib/index.js'
import { deferred, eventually, get, listen } from '../helpers/http.js'

const ORIGIN = { origin: 'https://app.example' }
const EXPOSED = 'Retry-After, RateLimit, RateLimit-Policy'

async function corsApp (t: Test, options: AdmissionOptions, corsOptions: FastifyCorsOptions = {}): Promise<FastifyInstance> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(cors, corsOptions)
  await app.register(admission, options)
  app.get('/api', async () => ({ ok: true }))
  return app
}

/** The fields a browser's code may read of a response: the safelisted ones and those exposed. */
function readable (headers: Record<string, string | string[] | undefined>): string[] {
  return String(headers['access-control-expose-headers'] ?? '').split(',').map((name) => name.trim().toLowerCase()).filter((name) => name !== '')
}

t.test('a 429 under @fastify/cors defaults exposes Retry-After and the RateLimit fields', async (t) => {
  for (const responseBody of ['json', 'problem', 'error'] as const) {
    const app = await corsApp(t, { rateLimit: { limit: 1, windowMs: 60_000 }, refusal: responseBody })
    const port = await listen(app)
    const admitted = await get(port, '/api', ORIGIN)
    t.equal(admitted.status, 200)
    t.equal(admitted.headers['access-control-allow-origin'], '*')
    t.equal(admitted.headers['access-control-expose-headers'], EXPOSED, `${responseBody}: an admission's fields are readable`)
    const refused = await get(port, '/api', ORIGIN)
    t.equal(refused.status, 429)
    t.equal(refused.headers['access-control-allow-origin'], '*')
    t.same(readable(refused.headers), ['retry-after', 'ratelimit', 'ratelimit-policy'], `${responseBody}: the refusal's too`)
    t.ok(Number(refused.headers['retry-after']) >= 1)
  }
})

t.test('a 503 of a full gate (written from bytes) exposes them too', async (t) => {
  const app = await corsApp(t, { maxInFlight: 1, rateLimit: false })
  const go = deferred()
  app.get('/slow', async () => { await go.promise; return 'late' })
  const port = await listen(app)
  const slow = get(port, '/slow', ORIGIN)
  t.ok(await eventually(() => app.admission.stats().inFlight === 1))
  const shed = await get(port, '/api', ORIGIN)
  t.equal(shed.status, 503)
  t.equal(shed.headers['access-control-allow-origin'], '*')
  t.equal(shed.headers['access-control-expose-headers'], EXPOSED)
  go.resolve()
  const served = await slow
  t.equal(served.headers['access-control-expose-headers'], undefined, 'an admission with no fields to read adds nothing')
})

t.test('names the application exposes stay, once each; `*` without credentials exposes them already', async (t) => {
  const listed = await corsApp(t, { rateLimit: { limit: 5, windowMs: 60_000 } }, { exposedHeaders: ['X-Request-Id', 'retry-after'] })
  const listedPort = await listen(listed)
  t.equal((await get(listedPort, '/api', ORIGIN)).headers['access-control-expose-headers'], 'X-Request-Id, retry-after, RateLimit, RateLimit-Policy')
  const star = await corsApp(t, { rateLimit: { limit: 5, windowMs: 60_000 } }, { exposedHeaders: '*' })
  t.equal((await get(await listen(star), '/api', ORIGIN)).headers['access-control-expose-headers'], '*')
  const credentials = await corsApp(t, { rateLimit: { limit: 5, windowMs: 60_000 } }, { exposedHeaders: '*', credentials: true, origin: true })
  t.equal((await get(await listen(credentials), '/api', ORIGIN)).headers['access-control-expose-headers'], `*, ${EXPOSED}`, 'with credentials `*` is a name, not a wildcard')
})

t.test('a list set as an array by the application is kept', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  app.addHook('onRequest', async (_request, reply) => {
    reply.header('access-control-allow-origin', 'https://app.example')
    reply.header('access-control-expose-headers', ['X-One', 'RateLimit'])
  })
  await app.register(admission, { rateLimit: { limit: 5, windowMs: 60_000 } })
  app.get('/api', async () => 'ok')
  const answer = await get(await listen(app), '/api')
  t.equal(answer.headers['access-control-expose-headers'], 'X-One, RateLimit, Retry-After, RateLimit-Policy')
})

t.test('a same-origin response gets no CORS field', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: { limit: 1, windowMs: 60_000 } })
  app.get('/api', async () => 'ok')
  const port = await listen(app)
  t.equal((await get(port, '/api')).headers['access-control-expose-headers'], undefined)
  t.equal((await get(port, '/api')).headers['access-control-expose-headers'], undefined)
})

t.test('preflights: answered by @fastify/cors in onRequest before the gate, charged when cors runs in preHandler', async (t) => {
  const preflight = { ...ORIGIN, 'access-control-request-method': 'GET' }
  const options = async (port: number): Promise<number> => {
    const { request } = await import('node:http')
    return await new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path: '/api', method: 'OPTIONS', headers: preflight, agent: false }, (res) => { res.resume(); resolve(res.statusCode!) })
      req.on('error', reject)
      req.end()
    })
  }
  const onRequest = await corsApp(t, { rateLimit: { limit: 1, windowMs: 60_000 } })
  const port = await listen(onRequest)
  t.equal(await options(port), 204)
  t.equal(await options(port), 204, 'a preflight takes nothing from the quota')
  t.equal((await get(port, '/api', ORIGIN)).status, 200, 'the request after it is admitted')
  const preHandler = await corsApp(t, { rateLimit: { limit: 1, windowMs: 60_000 } }, { hook: 'preHandler' })
  const late = await listen(preHandler)
  t.equal(await options(late), 204)
  t.equal(await options(late), 429, 'with cors in preHandler, the gate decides first: preflights are charged')
})
