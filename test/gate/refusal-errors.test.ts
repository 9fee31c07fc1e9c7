// `refusal: 'error'`: refusals go through Fastify's error handling as @fastify/rate-limit's
// do — the application's setErrorHandler and onError hooks see a typed error, Fastify's default
// handler answers it, and Retry-After and the RateLimit fields stay the gate's whatever is sent.
import t, { type Test } from 'tap'
import Fastify, { type FastifyError, type FastifyInstance } from 'fastify'
import admission, { AdmissionError, AdmissionOptionError, AdmissionRefusalError, memoryBackend, RatesUnavailableError, type AdmissionOptions, type BackendLimiter, type RatesBackend } from '../../lib/index.js'

const FIXED = { algorithm: 'fixed-window', limit: 1, windowMs: 60_000 } as const
// A clock that stands still: the fixed window ends 30 s after it.
const clock = (): number => 1_700_000_010_000
// A backend that never decides: Redis down, say.
const unavailableBackend: RatesBackend = {
  kind: 'custom',
  limiter: (_address, policy) => ({
    policy,
    consume: (() => Promise.reject(new RatesUnavailableError('down', { retryAfterMs: 2500 }))) as BackendLimiter['consume'],
    state: async () => undefined,
    delete: async () => false
  }),
  stop: async () => {}
}
const SHED_ALL = { healthCheck: async () => false, healthCheckInterval: 60_000, retryAfter: 60 }

async function app (t: Test, options: AdmissionOptions, shape?: (app: FastifyInstance) => void): Promise<FastifyInstance> {
  const fastify = Fastify()
  t.teardown(() => fastify.close())
  shape?.(fastify)
  await fastify.register(admission, { backend: memoryBackend({ clock }), rateLimit: FIXED, refusal: 'error', ...options })
  fastify.get('/', async () => 'ok')
  await fastify.ready()
  return fastify
}

t.test('the application\'s error handler gets a typed refusal and may answer it its way; Retry-After and the RateLimit fields stay', async (t) => {
  const seen: unknown[] = []
  const a = await app(t, {}, (fastify) => {
    fastify.setErrorHandler((error, _request, reply) => {
      seen.push(error)
      // An application that shapes every error in one place, and tries to tell the client to come back at once.
      return reply.code((error as FastifyError).statusCode ?? 500).header('retry-after', '0').send({ oops: (error as Error).message })
    })
  })
  t.equal((await a.inject('/')).statusCode, 200)
  const refused = await a.inject('/')
  t.equal(refused.statusCode, 429)
  t.same(refused.json(), { oops: 'Rate limit exceeded, retry in 30 seconds' })
  t.equal(refused.headers['retry-after'], '30', 'the handler cannot make it earlier')
  t.equal(refused.headers.ratelimit, '"default";r=0;t=30')
  t.equal(seen.length, 1)
  const error = seen[0] as AdmissionRefusalError
  t.ok(error instanceof AdmissionRefusalError)
  t.ok(error instanceof AdmissionError)
  t.match(error, { name: 'AdmissionRefusalError', code: 'ADMISSION_LIMITED', statusCode: 429, reason: 'limited', retryAfterSeconds: 30 })
  t.notMatch(String((error as Error).stack), /\n\s+at /, 'no stack frames: a refusal is an answer, not a fault (and frames were most of its cost)')
  t.equal(Error.stackTraceLimit, 10, 'the process\'s own limit is restored')
})

t.test('without a handler of its own, Fastify\'s default one answers it; onError hooks hear it', async (t) => {
  const errors: string[] = []
  const a = await app(t, {}, (fastify) => { fastify.addHook('onError', async (_request, _reply, error) => { errors.push((error as FastifyError).code!) }) })
  await a.inject('/')
  const refused = await a.inject('/')
  t.equal(refused.statusCode, 429)
  t.same(refused.json(), { statusCode: 429, code: 'ADMISSION_LIMITED', error: 'Too Many Requests', message: 'Rate limit exceeded, retry in 30 seconds' })
  t.equal(refused.headers['retry-after'], '30')
  t.same(errors, ['ADMISSION_LIMITED'])
})

t.test('a redirect: the handler answers a refusal with a 302', async (t) => {
  const a = await app(t, {}, (fastify) => {
    fastify.setErrorHandler((error, _request, reply) => error instanceof AdmissionRefusalError ? reply.redirect('/slow-down', 302) : reply.send(error))
  })
  await a.inject('/')
  const refused = await a.inject('/')
  t.equal(refused.statusCode, 302)
  t.equal(refused.headers.location, '/slow-down')
  t.equal(refused.headers['retry-after'], '30', 'still carried')
})

t.test('sheds and a backend that cannot decide go the same way, each with its code', async (t) => {
  const shed = await app(t, { pressure: SHED_ALL })
  const answer = await shed.inject('/')
  t.equal(answer.statusCode, 503)
  t.same(answer.json(), { statusCode: 503, code: 'ADMISSION_SHED', error: 'Service Unavailable', message: 'Server is under pressure, retry in 60 seconds' })
  t.equal(answer.headers['retry-after'], '60')
  const down = await app(t, { backend: unavailableBackend })
  const unavailable = await down.inject('/')
  t.equal(unavailable.statusCode, 503)
  t.match(unavailable.json(), { statusCode: 503, code: 'ADMISSION_UNAVAILABLE', error: 'Service Unavailable' })
  t.equal(unavailable.headers['retry-after'], '3', 'the backend\'s own 2.5 s, rounded up')
})

t.test('with refusal: \'error\', refusals are never written from bytes: refusal.fast other than false is refused', async (t) => {
  for (const fastRefusals of ['shed', 'all'] as const) {
    const a = Fastify()
    t.teardown(() => a.close())
    const error = await a.register(admission, { refusal: { body: 'error', fast: fastRefusals } }).then(() => undefined, (e: unknown) => e)
    t.ok(error instanceof AdmissionOptionError, fastRefusals)
    t.match(error, { path: 'refusal.fast', message: /false or unset with body: 'error'/ })
  }
  const a = Fastify()
  t.teardown(() => a.close())
  const error = await a.register(admission, { refusal: 'errors' as never }).then(() => undefined, (e: unknown) => e)
  t.match(error, { path: 'refusal', message: /'json', 'text', 'problem' or 'error'/ })
})
