// `app.admission.plan(route)`: a route's steps by name, in the order its requests run them — the
// features it uses, and none it does not (an off feature is absent from the list, not skipped).
import t from 'tap'
import Fastify from 'fastify'
import admission from '../../lib/index.js'
import { scriptedBackend, decision } from '../helpers/metrics.js'

t.test('each route\'s steps, in order, with only the features it uses', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { maxInFlight: 10, rateLimit: { limit: 5, windowMs: 60_000 }, pressure: { maxHeapUsedBytes: 1e12 } })
  app.get('/plain', async () => 'ok')
  app.get('/open', { config: { admission: false } }, async () => 'ok')
  app.get('/after-auth', { config: { admission: { hook: 'preHandler', maxInFlight: 2 } } }, async () => 'ok')
  app.get('/listed', { config: { admission: { allowList: ['127.0.0.1'] } } }, async () => 'ok')
  app.get('/tiers', {
    config: { admission: { rateLimit: { tier: () => 'free', tiers: { free: { limit: 1, windowMs: 60_000 }, paid: { limit: 100, windowMs: 60_000 } } } } }
  }, async () => 'ok')
  app.post('/login', { config: { admission: { count: 'failures', rateLimit: { limit: 3, windowMs: 60_000 } } } }, async () => 'ok')
  await app.ready()
  const shed = ['retryAttempt', 'underPressure', 'inFlight']
  const quota = ['decideNow', 'headersNow', 'verdict', 'exposed', 'admit']
  t.same(app.admission.plan('GET /plain'), { onRequest: [...shed, 'clientKey', ...quota], preHandler: [] })
  t.same(app.admission.plan('GET /after-auth'), { onRequest: [...shed, 'onToPreHandler'], preHandler: ['clientKey', ...quota] }, 'the check after the route\'s own preHandlers')
  t.same(app.admission.plan('GET /listed'), { onRequest: [...shed, 'clientKey', 'allowList', ...quota], preHandler: [] })
  t.same(app.admission.plan('GET /tiers'), { onRequest: [...shed, 'clientKey', 'pickTier'], preHandler: [], tiers: { free: quota, paid: quota } })
  t.same(app.admission.plan('POST /login'), { onRequest: [...shed, 'clientKey', 'loginAttempt', 'decideNow', 'stackHeadersNow', 'verdict', 'exposed', 'admit'], preHandler: [] }, 'login throttling: a stack that checks')
  t.same(app.admission.plan('404'), { onRequest: ['retryAttempt', 'underPressure', 'whileFull', 'clientKey', ...quota], preHandler: [] }, 'requests that matched no route hold no slot')
  t.equal(app.admission.plan('GET /open'), undefined, 'an opted-out route has no plan')
  t.equal(app.admission.plan('GET /nowhere'), undefined)
})

t.test('a backend that answers by promise, no headers, no in-flight limit: fewer steps', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  const backend = scriptedBackend(() => decision(true))
  await app.register(admission, { backend, headers: false })
  app.get('/', async () => 'ok')
  app.get('/free', { config: { admission: { rateLimit: false } } }, async () => 'ok')
  await app.ready()
  t.same(app.admission.plan('GET /'), { onRequest: ['inFlight', 'clientKey', 'decideLater', 'verdict', 'admit'], preHandler: [] })
  t.same(app.admission.plan('GET /free'), { onRequest: ['inFlight', 'admit'], preHandler: [] }, 'no quota: no key, no decision')
  t.equal((await app.inject('/')).statusCode, 200, 'and the plan runs')
})

t.test('retries shed first: a step only where something sheds and retries is on', async (t) => {
  const plans = async (options: object, config: object = {}): Promise<string[]> => {
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(admission, { rateLimit: false, ...options })
    app.get('/', { config }, async () => 'ok')
    await app.ready()
    return app.admission.plan('GET /')!.onRequest as string[]
  }
  t.same(await plans({ maxInFlight: 10, retries: false }), ['inFlight', 'admit'], 'off: absent')
  t.same(await plans({}), ['inFlight', 'admit'], 'nothing sheds: absent')
  t.same(await plans({}, { admission: { maxInFlight: 4 } }), ['retryAttempt', 'inFlight', 'admit'], "a route's own semaphore")
  t.same(await plans({ queueDelay: true }), ['retryAttempt', 'underPressure', 'inFlight', 'admit'], 'queueing delay')
  t.same(await plans({ maxInFlight: 'auto' }), ['retryAttempt', 'underPressure', 'inFlight', 'admit'], "'auto'")
})
