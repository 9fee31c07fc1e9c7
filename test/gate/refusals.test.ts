// Refusals the application controls: `errorResponseBuilder` (as @fastify/rate-limit's: its value
// goes through Fastify's error handling) and the built-in `application/problem+json` body. Retry-After
// stays the gate's whatever the builder, its value's headers or the error handler say.
import t from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import { Writable } from 'node:stream'
import admission, { AdmissionOptionError, memoryBackend, type AdmissionOptions, type AdmissionRefusalContext } from '../../lib/index.js'
import { deferred, get, listen } from '../helpers/http.js'

const FIXED = { algorithm: 'fixed-window', limit: 1, windowMs: 60_000 } as const
// A clock that stands still: every wait is exact.
const clock = (): number => 1_700_000_010_000

/** An app with its log lines collected. */
async function appWith (options: AdmissionOptions): Promise<{ app: FastifyInstance, logs: Array<Record<string, unknown>> }> {
  const logs: Array<Record<string, unknown>> = []
  const stream = new Writable({ write (chunk: Buffer, _encoding, done) { logs.push(JSON.parse(chunk.toString()) as Record<string, unknown>); done() } })
  const app = Fastify({ logger: { level: 'info', stream } })
  await app.register(admission, { backend: memoryBackend({ clock }), rateLimit: FIXED, ...options })
  return { app, logs }
}

t.test('errorResponseBuilder: its object is the body, its context says why, Retry-After is honest', async (t) => {
  const contexts: AdmissionRefusalContext[] = []
  const { app } = await appWith({
    errorResponseBuilder (request, context) {
      contexts.push(context)
      return { statusCode: 429, error: 'Too Many Requests', message: `slow down, ${request.url}, retry in ${context.after}` }
    }
  })
  t.teardown(() => app.close())
  app.get('/x', async () => 'ok')
  t.equal((await app.inject('/x')).statusCode, 200)
  const refused = await app.inject('/x')
  t.equal(refused.statusCode, 429)
  // The fixed window ends 30 s after the clock's time.
  t.equal(refused.headers['retry-after'], '30')
  t.match(refused.headers['content-type'], /^application\/json/)
  t.same(refused.json(), { statusCode: 429, error: 'Too Many Requests', message: 'slow down, /x, retry in 30 seconds' })
  t.equal(refused.headers.ratelimit, '"default";r=0;t=30', 'the RateLimit headers are kept')
  t.same(contexts, [{
    statusCode: 429,
    reason: 'limited',
    retryAfterSeconds: 30,
    violatedPolicies: ['default'],
    policy: FIXED,
    route: 'GET /x',
    max: 1,
    ttl: 30_000,
    after: '30 seconds'
  }])
  t.match(app.admission.stats(), { admitted: 1, limited: 1 })
})

t.test("the builder's value goes through the app's setErrorHandler; neither can make Retry-After earlier", async (t) => {
  const { app } = await appWith({
    errorResponseBuilder: (_request, context) => ({ statusCode: context.statusCode, code: 'slow_down', headers: { 'retry-after': '0', 'x-from-builder': 'yes' } })
  })
  t.teardown(() => app.close())
  const seen: unknown[] = []
  app.setErrorHandler((error, _request, reply) => {
    seen.push(error)
    void reply.header('retry-after', '1').send({ handled: (error as { code: string }).code })
  })
  app.get('/x', async () => 'ok')
  await app.inject('/x')
  const refused = await app.inject('/x')
  t.equal(refused.statusCode, 429, 'a body the handler sends without a status goes out with the refusal\'s')
  t.equal(refused.headers['retry-after'], '30', 'set again at every send of the refusal')
  t.same(refused.json(), { handled: 'slow_down' })
  t.match(seen, [{ code: 'slow_down' }])
})

t.test("Fastify's default error handler: the value's statusCode and headers, an Error serialized as Fastify does", async (t) => {
  let ban = false
  const { app } = await appWith({
    errorResponseBuilder: (_request, context) => ban
      ? { statusCode: 403, error: 'Forbidden', headers: { 'retry-after': '1', 'x-ban': '1' } }
      : Object.assign(new Error(`Rate limit exceeded, retry in ${context.after}`), { statusCode: context.statusCode })
  })
  t.teardown(() => app.close())
  app.get('/x', async () => 'ok')
  await app.inject('/x')
  const error = await app.inject('/x')
  t.equal(error.statusCode, 429)
  t.equal(error.headers['retry-after'], '30')
  t.same(error.json(), { statusCode: 429, error: 'Too Many Requests', message: 'Rate limit exceeded, retry in 30 seconds' })
  ban = true
  const banned = await app.inject('/x')
  t.equal(banned.statusCode, 403, "the value's statusCode, as with @fastify/rate-limit's ban")
  t.equal(banned.headers['x-ban'], '1')
  t.equal(banned.headers['retry-after'], '30', "the value's own Retry-After is not taken")
})

t.test('shed and unavailable reach the builder too, with their reason and wait', async (t) => {
  const contexts: Array<Pick<AdmissionRefusalContext, 'reason' | 'statusCode' | 'retryAfterSeconds' | 'max'>> = []
  const app = Fastify()
  t.teardown(() => app.close())
  // One identity at most: a second client finds the backend full of live state (unavailable).
  await app.register(admission, {
    maxInFlight: 1,
    backend: memoryBackend({ clock, maxIdentities: 1 }),
    rateLimit: FIXED,
    key: (request) => String(request.headers['x-id']),
    errorResponseBuilder: (_request, { reason, statusCode, retryAfterSeconds, max }) => {
      contexts.push({ reason, statusCode, retryAfterSeconds, max })
      return { refused: reason }
    }
  })
  const hold = deferred()
  const entered = deferred()
  app.get('/slow', async () => { entered.resolve(); await hold.promise; return 'slow' })
  app.get('/x', async () => 'ok')
  const port = await listen(app)
  const slow = get(port, '/slow', { 'x-id': 'a' })
  await entered.promise
  const shed = await get(port, '/x', { 'x-id': 'a' })
  t.equal(shed.status, 503)
  t.equal(shed.headers['retry-after'], '1')
  t.same(JSON.parse(shed.body), { refused: 'shed' })
  hold.resolve()
  await slow
  const unavailable = await get(port, '/x', { 'x-id': 'b' })
  t.equal(unavailable.status, 503)
  t.equal(unavailable.headers['retry-after'], '30', 'until the one live state recovers')
  t.same(JSON.parse(unavailable.body), { refused: 'unavailable' })
  t.same(contexts, [
    { reason: 'shed', statusCode: 503, retryAfterSeconds: 1, max: 1 },
    { reason: 'unavailable', statusCode: 503, retryAfterSeconds: 30, max: 1 }
  ])
})

t.test('a builder that throws or returns no object: logged once, the built-in body, never a pass or a 500', async (t) => {
  let result: () => unknown = () => { throw new Error('builder bug') }
  const { app, logs } = await appWith({ refusal: 'problem', errorResponseBuilder: () => result() as object })
  t.teardown(() => app.close())
  app.get('/x', async () => 'ok')
  await app.inject('/x')
  for (const bad of [() => { throw new Error('builder bug') }, () => undefined, () => null, () => false, () => 'text', () => Promise.resolve({})]) {
    result = bad
    const refused = await app.inject('/x')
    t.equal(refused.statusCode, 429, String(bad))
    t.equal(refused.headers['retry-after'], '30')
    t.match(refused.headers['content-type'], /^application\/problem\+json/)
    t.match(refused.json(), { type: 'https://iana.org/assignments/http-problem-types#quota-exceeded', status: 429 })
  }
  const failures = logs.filter((line) => /errorResponseBuilder failed/.test(String(line.msg)))
  t.equal(failures.length, 1, 'once, until it works again')
  t.match(failures[0], { level: 50, callback: 'errorResponseBuilder', route: 'GET /x', err: { message: 'builder bug' } })
  result = () => ({ ok: 'again' })
  t.same((await app.inject('/x')).json(), { ok: 'again' })
  result = () => 42
  t.equal((await app.inject('/x')).statusCode, 429)
  const again = logs.filter((line) => /errorResponseBuilder failed/.test(String(line.msg)))
  t.equal(again.length, 2, 'a failure after a success is logged again')
  t.match(again[1], { err: { message: 'errorResponseBuilder returned a number, not an object' } })
})

t.test('without a problem body, a failing builder falls back to the JSON body', async (t) => {
  const { app } = await appWith({ errorResponseBuilder: () => undefined as unknown as object })
  t.teardown(() => app.close())
  app.get('/x', async () => 'ok')
  await app.inject('/x')
  const refused = await app.inject('/x')
  t.same(refused.json(), { statusCode: 429, error: 'Too Many Requests', message: 'Rate limit exceeded, retry in 30 seconds' })
})

t.test("refusal 'problem': RFC 9457 with the RateLimit draft's problem types", async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { maxInFlight: 1, backend: memoryBackend({ clock, maxIdentities: 1 }), rateLimit: FIXED, refusal: 'problem', key: (r) => String(r.headers['x-id']) })
  const hold = deferred()
  const entered = deferred()
  app.get('/slow', async () => { entered.resolve(); await hold.promise; return 'slow' })
  app.get('/x', async () => 'ok')
  const port = await listen(app)
  const slow = get(port, '/slow', { 'x-id': 'a' })
  await entered.promise
  const shed = await get(port, '/x', { 'x-id': 'a' })
  t.equal(shed.status, 503)
  t.equal(shed.headers['retry-after'], '1')
  t.match(JSON.parse(shed.body), { type: 'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity', status: 503, detail: 'Server is at capacity, retry in 1 second' })
  hold.resolve()
  await slow
  // The slow request took a's one unit.
  const limited = await get(port, '/x', { 'x-id': 'a' })
  t.equal(limited.status, 429)
  t.equal(limited.headers['content-type'], 'application/problem+json; charset=utf-8')
  t.equal(limited.headers['retry-after'], '30')
  t.equal(limited.body, '{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Request cannot be satisfied as assigned quota has been exceeded","status":429,"detail":"Rate limit exceeded, retry in 30 seconds","violated-policies":["default"]}')
  const unavailable = await get(port, '/x', { 'x-id': 'b' })
  t.equal(unavailable.status, 503)
  t.same(JSON.parse(unavailable.body), {
    type: 'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity',
    title: 'Request cannot be satisfied due to temporary server capacity constraints',
    status: 503,
    detail: 'Service temporarily unavailable, retry in 30 seconds'
  })
})

t.test("problem body with limitStatusCode 503: still quota-exceeded, with the status sent", async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend: memoryBackend({ clock }), rateLimit: FIXED, refusal: { body: 'problem', limitStatusCode: 503 } })
  app.get('/x', async () => 'ok')
  await app.inject('/x')
  const refused = await app.inject('/x')
  t.equal(refused.statusCode, 503)
  t.match(refused.json(), { type: 'https://iana.org/assignments/http-problem-types#quota-exceeded', status: 503, 'violated-policies': ['default'] })
})

t.test('a route builder overrides the plugin\'s; a preHandler check and the 404 hook refuse through it too', async (t) => {
  const { app } = await appWith({ errorResponseBuilder: () => ({ from: 'plugin' }) })
  t.teardown(() => app.close())
  app.setNotFoundHandler({ preHandler: app.admission.notFound }, async (_request, reply) => reply.code(404).send({ missing: true }))
  app.get('/plugin', async () => 'ok')
  app.get('/route', { config: { admission: { rateLimit: FIXED, errorResponseBuilder: () => ({ from: 'route' }) } } }, async () => 'ok')
  app.get('/late', { config: { admission: { rateLimit: FIXED, hook: 'preHandler' } } }, async () => 'ok')
  for (const [url, from] of [['/plugin', 'plugin'], ['/route', 'route'], ['/late', 'plugin']] as const) {
    t.equal((await app.inject(url)).statusCode, 200, url)
    const refused = await app.inject(url)
    t.equal(refused.statusCode, 429, url)
    t.equal(refused.headers['retry-after'], '30', url)
    t.same(refused.json(), { from }, url)
  }
  // The 404s share the plugin's quota, which /plugin emptied.
  const missing = await app.inject('/nope')
  t.equal(missing.statusCode, 429)
  t.same(missing.json(), { from: 'plugin' })
})

t.test('errorResponseBuilder and refusal are checked at registration', async (t) => {
  for (const [options, path, message] of [
    [{ errorResponseBuilder: 'json' }, 'errorResponseBuilder', "Expected `errorResponseBuilder` to be a function (request, context) => object, got 'json' (string)"],
    [{ errorResponseBuilder: async () => ({}) }, 'errorResponseBuilder', /a synchronous function \(request, context\) => object/],
    [{ refusal: 'problem+json' }, 'refusal', "Expected `refusal` to be 'json', 'text', 'problem' or 'error', got 'problem+json' (string)"],
    [{ refusal: { body: 'html' } }, 'refusal.body', "Expected `refusal.body` to be 'json', 'text', 'problem' or 'error', got 'html' (string)"],
    [{ refusal: { limitStatusCode: 418 } }, 'refusal.limitStatusCode', 'Expected `refusal.limitStatusCode` to be 429 or 503, got 418 (number)'],
    [{ refusal: { bdy: 'text' } }, 'refusal.bdy', "Expected `refusal.bdy` to be a known option (unknown option; did you mean `body`?), got 'text' (string)"],
    [{ refusal: 429 }, 'refusal', "Expected `refusal` to be 'json', 'text', 'problem' or 'error', or an object { body?, limitStatusCode?, fast? }, got 429 (number)"]
  ] as Array<[Record<string, unknown>, string, string | RegExp]>) {
    const app = Fastify()
    const error = await app.register(admission, options as AdmissionOptions).ready().then(() => undefined, (e: unknown) => e)
    t.type(error, AdmissionOptionError)
    t.match(error, { code: 'ADMISSION_INVALID_OPTION', path, message })
    await app.close()
  }
  const app = Fastify()
  await app.register(admission)
  app.get('/x', { config: { admission: { errorResponseBuilder: 1 as never } } }, async () => 'ok')
  t.match(await app.ready().then(() => undefined, (e: unknown) => e), { code: 'ADMISSION_INVALID_OPTION', path: 'config.admission of GET /x.errorResponseBuilder', value: 1 })
  await app.close()
})
