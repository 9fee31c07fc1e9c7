// A per-client in-flight limit (`clientInFlight`): a client key holds at most N requests in flight;
// beyond, 429 with Retry-After and the `client-in-flight` policy. Its slot goes back by the permit's
// one release rule: a response written, a client gone, a refusal later in the plan, a long-lived
// phase begun, a handler timeout. Requests are held in their handlers: no timing.
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import admission from '../../lib/index.js'
import type { AdmissionOptions } from '../../lib/gate/options/options.js'
import { AdmissionOptionError } from '../../lib/gate/errors.js'
import { deferred, eventually, get, getThenAbort, listen } from '../helpers/http.js'

const key = (request: { headers: Record<string, unknown> }): string => String(request.headers['x-client'])
/** Requests holding a slot of their route, over every route (no global limit here). */
const inFlight = (app: FastifyInstance): number => Object.values(app.admission.stats().routes).reduce((n, route) => n + route.inFlight, 0)
const as = (client: string): Record<string, string> => ({ 'x-client': client })

async function held (t: Test, options: AdmissionOptions = {}): Promise<{ app: FastifyInstance, port: number, release: () => void }> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: false, key, clientInFlight: 2, ...options })
  let hold = deferred()
  const handler = async (): Promise<string> => { await hold.promise; return 'ok' }
  app.get('/a', handler)
  app.get('/b', handler)
  app.get('/own', { config: { admission: { clientInFlight: 1 } } }, handler)
  app.get('/none', { config: { admission: { clientInFlight: false } } }, handler)
  app.get('/quota', { config: { admission: { rateLimit: { limit: 1, windowMs: 60_000 } } } }, async () => 'ok')
  const port = await listen(app)
  return { app, port, release: () => { hold.resolve(); hold = deferred() } }
}

t.test('a client holds at most N in flight across the routes without their own; others are not held back', async (t) => {
  const { app, port, release } = await held(t)
  t.same(app.admission.plan('GET /a')!.onRequest, ['inFlight', 'clientKey', 'clientInFlight', 'admit'])
  const first = [get(port, '/a', as('x')), get(port, '/b', as('x'))]
  t.ok(await eventually(() => inFlight(app) === 2), 'two of x held')
  const refused = await get(port, '/a', as('x'))
  t.equal(refused.status, 429, 'a third of x: 429')
  t.equal(refused.headers['retry-after'], '1')
  t.equal(refused.headers['ratelimit-policy'], '"client-in-flight";q=2;qu="concurrent-requests"')
  t.equal(refused.headers.ratelimit, '"client-in-flight";r=0')
  const other = get(port, '/a', as('y'))
  t.ok(await eventually(() => inFlight(app) === 3), 'another client is admitted')
  const apart = get(port, '/own', as('x'))
  t.ok(await eventually(() => inFlight(app) === 4), "a route's own limit counts apart")
  t.equal((await get(port, '/own', as('x'))).status, 429, "the route's own limit of 1")
  const unlimited = get(port, '/none', as('x'))
  t.ok(await eventually(() => inFlight(app) === 5), 'clientInFlight: false on a route')
  release()
  t.same((await Promise.all([...first, other, apart, unlimited])).map((a) => a.status), [200, 200, 200, 200, 200])
  t.match(app.admission.stats(), { limited: 2 })
  t.equal(inFlight(app), 0)
  // Every slot came back: x may hold two again.
  const again = [get(port, '/a', as('x')), get(port, '/a', as('x'))]
  t.ok(await eventually(() => inFlight(app) === 2))
  release()
  t.same((await Promise.all(again)).map((a) => a.status), [200, 200])
})

t.test("a refusal later in the plan gives the client's slot back; so does a client that leaves", async (t) => {
  const { app, port, release } = await held(t)
  t.equal((await get(port, '/quota', as('x'))).status, 200)
  for (let i = 0; i < 3; i++) t.equal((await get(port, '/quota', as('x'))).status, 429, `quota empty ${i + 1}: its slot back each time`)
  t.match(app.admission.stats().routes['GET /quota'], { limited: 3 })
  const gone = deferred()
  const aborted = [getThenAbort(port, '/a', gone.promise), getThenAbort(port, '/a', gone.promise)]
  t.ok(await eventually(() => inFlight(app) === 2))
  gone.resolve()
  await Promise.all(aborted)
  release()
  t.ok(await eventually(() => inFlight(app) === 0), 'the aborted permits ended')
  const after = [get(port, '/a', as('x')), get(port, '/a', as('x'))]
  t.ok(await eventually(() => inFlight(app) === 2), "both of x's slots came back with the aborted requests")
  release()
  await Promise.all(after)
})

t.test('a handler timeout: the slot goes back when the handler\'s work ends', async (t) => {
  const app = Fastify({ handlerTimeout: 50 } as object)
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: false, key, clientInFlight: 1 })
  let hold = deferred()
  app.get('/', async () => { await hold.promise; return 'ok' })
  const port = await listen(app)
  t.equal((await get(port, '/', as('x'))).status, 503, "Fastify's handler timeout answers")
  t.equal((await get(port, '/', as('x'))).status, 429, 'the handler still works: its slot is held')
  hold.resolve()
  hold = deferred()
  t.ok(await eventually(() => inFlight(app) === 0))
  hold.resolve()
  t.equal((await get(port, '/', as('x'))).status, 200, 'back once the work ended')
})

t.test('enforce: false counts a would-limit and lets it on; refusal: error hands a typed refusal', async (t) => {
  const { app, port, release } = await held(t, { enforce: false, clientInFlight: 1 })
  const first = get(port, '/a', as('x'))
  t.ok(await eventually(() => inFlight(app) === 1))
  const second = get(port, '/a', as('x'))
  t.ok(await eventually(() => app.admission.stats().wouldLimit === 1))
  release()
  t.same((await Promise.all([first, second])).map((a) => a.status), [200, 200])

  const errors = Fastify()
  t.teardown(() => errors.close())
  await errors.register(admission, { rateLimit: false, key, clientInFlight: 1, refusal: 'error' })
  const hold = deferred()
  errors.get('/', async () => { await hold.promise; return 'ok' })
  let code: unknown
  errors.setErrorHandler((error, _request, reply) => { code = (error as { code?: string }).code; return reply.send(error) })
  const p = errors.inject({ url: '/', headers: as('x') })
  await eventually(() => inFlight(errors) === 1)
  const refused = await errors.inject({ url: '/', headers: as('x') })
  t.equal(refused.statusCode, 429)
  t.equal(code, 'ADMISSION_LIMITED')
  hold.resolve()
  await p
})

t.test('options: a positive integer or false, at registration and on a route', async (t) => {
  for (const [options, route, path] of [
    [{ clientInFlight: 0 }, undefined, 'clientInFlight'],
    [{ clientInFlight: 1.5 }, undefined, 'clientInFlight'],
    [{}, { clientInFlight: 'two' }, 'config.admission of GET /.clientInFlight']
  ] as const) {
    const app = Fastify()
    let error = await app.register(admission, options as AdmissionOptions).then(() => undefined, (e: unknown) => e)
    if (route !== undefined) {
      app.get('/', { config: { admission: route as object } }, async () => 'ok')
      error = await app.ready().then(() => undefined, (e: unknown) => e)
    }
    t.ok(error instanceof AdmissionOptionError, JSON.stringify(options))
    t.equal((error as AdmissionOptionError).path, path)
    await app.close().catch(() => {})
  }
})

t.test('in the plan: after an allow list that skips shedding, and in preHandler with the rate check', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: false, key, clientInFlight: 1, allowList: { clients: ['vip'], skipsShedding: true }, headers: false, onLimit: () => { limited++ } })
  let limited = 0
  let hold = deferred()
  app.get('/', async () => { await hold.promise; return 'ok' })
  await app.ready()
  t.same(app.admission.plan('GET /')!.onRequest, ['clientKey', 'allowFirst', 'inFlight', 'clientInFlight', 'admit'])
  const first = app.inject({ url: '/', headers: as('x') })
  const vip = [app.inject({ url: '/', headers: as('vip') }), app.inject({ url: '/', headers: as('vip') })]
  await eventually(() => inFlight(app) === 1)
  const refused = await app.inject({ url: '/', headers: as('x') })
  t.equal(refused.statusCode, 429)
  t.equal(refused.headers['ratelimit-policy'], undefined, 'headers: false sends no fields')
  t.equal(limited, 1, 'onLimit is told')
  hold.resolve()
  hold = deferred()
  t.same((await Promise.all([first, ...vip])).map((r) => r.statusCode), [200, 200, 200], 'a client on the allow list skips the limit')

  const after = Fastify()
  t.teardown(() => after.close())
  await after.register(admission, { rateLimit: false, key, clientInFlight: 1, hook: 'preHandler' })
  after.get('/', async () => 'ok')
  await after.ready()
  t.same(after.admission.plan('GET /'), { onRequest: ['inFlight', 'onToPreHandler'], preHandler: ['clientKey', 'clientInFlight', 'admit'] }, 'after authentication, with the key')
  t.equal((await after.inject({ url: '/', headers: as('x') })).statusCode, 200)
  t.equal((await after.inject({ url: '/', headers: as('x') })).statusCode, 200, 'its slot came back')
})
