import t from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import { Writable } from 'node:stream'
import admission, { AdmissionOptionError, memoryBackend, RatesPolicyConflictError, RatesUnavailableError, type AdmissionOptions, type RatesBackend } from '../../lib/index.js'
import type { BackendLimiter } from '../../lib/rates/backend.js'
import type { Teardown } from '../helpers/http.js'

/** A backend whose limiter answers each consume() with `answer()`. */
function backendAnswering (answer: () => unknown): RatesBackend {
  return {
    kind: 'custom',
    limiter: (_address, policy) => ({
      policy,
      consume: (() => answer()) as BackendLimiter['consume'],
      state: async () => undefined,
      delete: async () => false
    }),
    stop: async () => {}
  }
}

/** An app whose error logs are collected, with one limited route. */
async function appWith (t: Teardown, options: AdmissionOptions): Promise<{ app: FastifyInstance, logs: Array<Record<string, unknown>> }> {
  const logs: Array<Record<string, unknown>> = []
  const stream = new Writable({ write (chunk, _encoding, done) { logs.push(JSON.parse(String(chunk)) as Record<string, unknown>); done() } })
  const app = Fastify({ logger: { level: 'error', stream } })
  t.teardown(() => app.close())
  await app.register(admission, { maxInFlight: 4, rateLimit: { limit: 10, windowMs: 60_000, burst: 5 }, ...options })
  app.get('/x', async () => 'ok')
  return { app, logs }
}

const FAILURES: Record<string, () => unknown> = {
  'a rejection that is not a RatesError': () => Promise.reject(new Error('a bug in the backend')),
  'a synchronous throw': () => { throw new TypeError('boom') },
  'a policy conflict at request time (a rolling deploy on one prefix)': () => Promise.reject(new RatesPolicyConflictError('app#admission:*', { algorithm: 'token-bucket', limit: 5, windowMs: 1000, burst: 5 }, { algorithm: 'token-bucket', limit: 10, windowMs: 60_000, burst: 5 })),
  'an unavailable backend': () => Promise.reject(new RatesUnavailableError('down', { retryAfterMs: 2500 })),
  'a decision that is not one (junk)': async () => ({ allowed: 'yes', remaining: 1 }),
  'a non-object decision': async () => 42,
  'a denial without a wait': async () => ({ allowed: false, remaining: 0, resetAt: 0 })
}

for (const [name, answer] of Object.entries(FAILURES)) {
  t.test(`${name}: 503 by onBackendError, counted, logged once with route and policy, no internals in the body`, async (t) => {
    const { app, logs } = await appWith(t, { backend: backendAnswering(answer) })
    const first = await app.inject('/x')
    const second = await app.inject('/x')
    for (const res of [first, second]) {
      t.equal(res.statusCode, 503)
      t.match(res.headers['retry-after'], /^[1-9]\d*$/)
      t.notMatch(res.body, /admission:|app#|token-bucket|boom|bug|down/, 'the body names nothing inside')
      t.same(res.json(), { statusCode: 503, error: 'Service Unavailable', message: `Service temporarily unavailable, retry in ${res.headers['retry-after']} second${res.headers['retry-after'] === '1' ? '' : 's'}` })
    }
    if (name === 'an unavailable backend') t.equal(first.headers['retry-after'], '3', 'the backend\'s own wait, rounded up')
    t.match(app.admission.stats(), { unavailable: 2, shed: 0, admitted: 0, inFlight: 0, routes: { 'GET /x': { unavailable: 2 } } })
    const errors = logs.filter((line) => line.level === 50)
    t.equal(errors.length, 1, 'logged once, not per request')
    t.match(errors[0], { route: 'GET /x', policy: '10 per 60000 ms (token-bucket, burst 5)' })
    t.match(String(errors[0]!.msg), /could not decide for GET \/x/)
  })
}

t.test("onBackendError 'allow' admits on any failure, counted as admitted and unavailable, with the policy and no guessed RateLimit", async (t) => {
  const { app } = await appWith(t, { backend: backendAnswering(() => Promise.reject(new Error('bug'))), onBackendError: 'allow' })
  const res = await app.inject('/x')
  t.equal(res.statusCode, 200)
  t.equal(res.headers['ratelimit-policy'], '"default";q=5;w=30', 'the policy is known without a decision')
  t.equal(res.headers.ratelimit, undefined, 'what remains is not: no RateLimit field')
  t.match(app.admission.stats(), { admitted: 1, unavailable: 1, inFlight: 0 })
  const quiet = await appWith(t, { backend: backendAnswering(() => Promise.reject(new Error('bug'))), onBackendError: 'allow', headers: false })
  t.equal((await quiet.app.inject('/x')).headers['ratelimit-policy'], undefined, 'headers: false sends none')
  // A stack's fields, and the pk on them: the policy alone too.
  const failing = (): Promise<never> => Promise.reject(new Error('bug'))
  const withStacks: RatesBackend = { ...backendAnswering(failing), stack: (_address, policies) => ({ policies, consume: failing, check: failing, state: async () => [], delete: async () => false }) }
  const stacked = await appWith(t, { backend: withStacks, onBackendError: 'allow', rateLimit: [{ limit: 10, windowMs: 60_000, name: 'minute' }, { limit: 100, windowMs: 3_600_000, name: 'hour' }] })
  const fromStack = await stacked.app.inject('/x')
  t.same([fromStack.statusCode, typeof fromStack.headers['ratelimit-policy'], fromStack.headers.ratelimit], [200, 'string', undefined], 'a stack: the policies, no RateLimit')
  const keyed = await appWith(t, { backend: backendAnswering(() => Promise.reject(new Error('bug'))), onBackendError: 'allow', headers: { partitionKey: 'a secret of sixteen or more' } })
  const withPk = await keyed.app.inject('/x')
  t.same([withPk.statusCode, withPk.headers['ratelimit-policy'], withPk.headers.ratelimit], [200, '"default";q=5;w=30', undefined], 'with a partitionKey: no RateLimit to put a pk on')
})

t.test("a full memory backend under a stack, onBackendError 'allow': the policies, no guessed RateLimit", async (t) => {
  const { app } = await appWith(t, {
    backend: memoryBackend({ maxIdentities: 1 }),
    onBackendError: 'allow',
    key: (request) => String(request.headers['x-client']),
    rateLimit: [{ limit: 10, windowMs: 60_000, name: 'minute' }, { limit: 100, windowMs: 3_600_000, name: 'hour' }]
  })
  const first = await app.inject({ url: '/x', headers: { 'x-client': 'a' } })
  t.equal(first.headers.ratelimit, '"minute";r=9;t=6, "hour";r=99;t=36', 'the one client the backend holds: its numbers')
  const second = await app.inject({ url: '/x', headers: { 'x-client': 'b' } })
  t.same([second.statusCode, second.headers['ratelimit-policy'], second.headers.ratelimit], [200, first.headers['ratelimit-policy'], undefined], 'a client the full backend cannot hold: admitted, the policies alone')
})

t.test('a route chooses its own onBackendError (as @fastify/rate-limit\'s skipOnError per route)', async (t) => {
  for (const plugin of ['deny', 'allow'] as const) {
    const other = plugin === 'deny' ? 'allow' : 'deny'
    const { app, logs } = await appWith(t, { backend: backendAnswering(() => Promise.reject(new Error('down'))), onBackendError: plugin })
    app.get('/own', { config: { admission: { onBackendError: other } } }, async () => 'ok')
    app.get('/inherits', { config: { admission: { cost: 2 } } }, async () => 'ok')
    const status = (choice: 'deny' | 'allow'): number => choice === 'allow' ? 200 : 503
    t.equal((await app.inject('/x')).statusCode, status(plugin), `plugin ${plugin}: a route without its own`)
    t.equal((await app.inject('/inherits')).statusCode, status(plugin), 'a route with config.admission but no onBackendError takes the plugin\'s')
    t.equal((await app.inject('/own')).statusCode, status(other), `the route's own: ${other}`)
    const said = logs.filter((line) => line.level === 50).map((line) => String(line.msg))
    t.ok(said.some((msg) => msg.includes('GET /own') && msg.includes(`onBackendError '${other}'`)), 'the log names the route\'s answer')
  }
  const bad = Fastify()
  t.teardown(() => bad.close())
  await bad.register(admission)
  bad.get('/y', { config: { admission: { onBackendError: 'skip' as 'allow' } } }, async () => 'ok')
  t.match(await bad.ready().then(() => undefined, (e: unknown) => e), { code: 'ADMISSION_INVALID_OPTION', path: 'config.admission of GET /y.onBackendError' })
})

t.test('a failure is logged again after a decision succeeded in between', async (t) => {
  let fail = true
  const { app, logs } = await appWith(t, {
    backend: backendAnswering(() => fail ? Promise.reject(new Error('flaky')) : Promise.resolve({ allowed: true, denied: false, remaining: 4, resetAt: Date.now() + 1000 }))
  })
  await app.inject('/x')
  await app.inject('/x')
  fail = false
  t.equal((await app.inject('/x')).statusCode, 200)
  fail = true
  await app.inject('/x')
  t.equal(logs.filter((line) => line.level === 50).length, 2)
})

t.test('a custom backend whose limiter() returns junk fails registration with a typed error, never the process', async (t) => {
  for (const junk of [undefined, null, 42, {}, { consume: () => {} }, { consume: () => {}, state: () => {}, delete: () => {}, synchronous: 1 }]) {
    const app = Fastify()
    t.teardown(() => app.close())
    const backend: RatesBackend = { kind: 'junk', limiter: () => junk as never, stop: async () => {} }
    const error = await app.register(admission, { backend }).then(() => undefined, (e: unknown) => e)
    t.type(error, AdmissionOptionError)
    t.equal((error as AdmissionOptionError).path, 'backend')
    t.match((error as Error).message, /limiter\(\) returns/)
  }
  // On a route of its own too: reported at ready().
  let calls = 0
  const app = Fastify()
  t.teardown(() => app.close())
  const good = memoryBackend()
  const backend: RatesBackend = { kind: 'half', limiter: (a, p) => (++calls === 1 ? good.limiter(a, p) : 'junk') as never, stop: async () => {} }
  await app.register(admission, { backend })
  app.get('/own', { config: { admission: { rateLimit: { limit: 1, windowMs: 1000 } } } }, async () => 'ok')
  const error = await app.ready().then(() => undefined, (e: unknown) => e)
  t.type(error, AdmissionOptionError)
})

t.test('a decision with more remaining than the quota still sends r <= q', async (t) => {
  const { app } = await appWith(t, { backend: backendAnswering(async () => ({ allowed: true, denied: false, remaining: 1e6, resetAt: Date.now() })) })
  const res = await app.inject('/x')
  t.equal(res.headers['ratelimit-policy'], '"default";q=5;w=30')
  t.equal(res.headers.ratelimit, '"default";r=5', 'r clamped to q: full capacity, so no t (nothing more comes)')
})

t.test('a custom backend that gives no moreAt: t from its resetAt (later, never early), within Retry-After on a refusal', async (t) => {
  const answers: Array<() => unknown> = [
    async () => ({ allowed: true, denied: false, remaining: 2, resetAt: Date.now() + 20_000 }),
    async () => ({ allowed: true, denied: false, remaining: 2, resetAt: Date.now() + 20_000, moreAt: Date.now() + 5000 }),
    async () => ({ allowed: false, denied: true, remaining: 0, retryAfterMs: 3000, resetAt: Date.now() + 20_000 }),
    async () => ({ allowed: false, denied: true, remaining: 0, retryAfterMs: 3000, resetAt: Date.now() + 20_000, moreAt: Date.now() + 2000 })
  ]
  const { app } = await appWith(t, { backend: backendAnswering(() => answers.shift()!()) })
  t.equal((await app.inject('/x')).headers.ratelimit, '"default";r=2;t=20', 'no moreAt: resetAt stands for it')
  t.equal((await app.inject('/x')).headers.ratelimit, '"default";r=2;t=5', 'its moreAt when it gives one')
  const refused = await app.inject('/x')
  t.equal(refused.headers['retry-after'], '3')
  t.equal(refused.headers.ratelimit, '"default";r=0;t=3', 'a refusal: resetAt cut to Retry-After')
  t.equal((await app.inject('/x')).headers.ratelimit, '"default";r=0;t=2', 'a moreAt within Retry-After stays')
})
