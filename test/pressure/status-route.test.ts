// The status route (`pressure.exposeStatusRoute`) as whoever can reach it sees it: a route that
// collides with one of the application's fails the registration (catchable), and the route
// answers only what it was asked to expose.
import t from 'tap'
import Fastify from 'fastify'
import admission from '../../lib/index.js'

t.test('a status route colliding with a route of the application fails the registration, catchable, naming the path and the fix', async (t) => {
  for (const declare of ['before register', 'in a plugin registered before'] as const) {
    const app = Fastify()
    t.teardown(() => app.close())
    if (declare === 'before register') app.get('/status', async () => 'mine')
    else await app.register(async (child) => { child.get('/status', async () => 'mine') })
    let caught: unknown
    try {
      await app.register(admission, { rateLimit: false, pressure: { maxRssBytes: 1e15, exposeStatusRoute: true } })
      await app.ready()
    } catch (error) {
      caught = error
    }
    t.match(caught, {
      name: 'AdmissionOptionError',
      code: 'ADMISSION_INVALID_OPTION',
      path: 'pressure.exposeStatusRoute',
      message: /GET \/status is already declared.*exposeStatusRoute: \{ url: /
    }, declare)
    t.match((caught as { cause?: { code?: string } }).cause, { code: 'FST_ERR_DUPLICATED_ROUTE' }, 'Fastify\'s own error as the cause')
  }
})

t.test('any other error of the status route\'s declaration reaches register() too', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await t.rejects(async () => {
    await app.register(admission, { rateLimit: false, pressure: { maxRssBytes: 1e15, exposeStatusRoute: { routeOpts: { bodyLimit: 'x' as unknown as number } } } })
  }, { code: 'FST_ERR_ROUTE_BODY_LIMIT_OPTION_NOT_INT' })
})

const READINGS = { eventLoopDelay: 3, eventLoopUtilization: 0.2, heapUsedBytes: 1234, rssBytes: 5678 }

t.test('by default the status route says whether the server is under pressure, and nothing else', async (t) => {
  let healthy = true
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, {
    rateLimit: false,
    pressure: { maxHeapUsedBytes: 10_000, readings: () => READINGS, healthCheck: () => healthy && { db: 'db.internal:5432' }, exposeStatusRoute: true, sampleInterval: 10 }
  })
  await app.ready()
  const ok = await app.inject('/status')
  t.equal(ok.statusCode, 200)
  t.same(ok.json(), { status: 'ok' }, 'no readings, no limits, no counters, nothing of the health check\'s answer')
  healthy = false
  let res = ok
  // The health check's answer is kept for a sample interval: ask until it is run again.
  while (res.statusCode === 200) res = await app.inject('/status')
  t.equal(res.statusCode, 503)
  t.equal(res.headers['retry-after'], '1')
  t.same(res.json(), { status: 'under-pressure' }, 'not which signal, nor its value')
})

t.test("expose: 'details' adds the reason, the readings, the limits, the counters and the health check's object", async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, {
    rateLimit: false,
    pressure: { maxHeapUsedBytes: 10_000, readings: () => READINGS, healthCheck: () => ({ db: 'up' }), exposeStatusRoute: { url: '/admission/status', expose: 'details' } }
  })
  await app.ready()
  const res = await app.inject('/admission/status')
  t.equal(res.statusCode, 200)
  t.match(res.json(), { db: 'up', status: 'ok', underPressure: false, readings: READINGS, limits: { heapUsedBytes: 10_000 }, counts: { handled: 0 } })
})

t.test('the health check is bounded: an answer is kept for a sample interval, whoever asks', async (t) => {
  let runs = 0
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, {
    maxInFlight: 2,
    rateLimit: { limit: 5, windowMs: 60_000 },
    pressure: { sampleInterval: 60_000, exposeStatusRoute: true, healthCheck: async () => ++runs > 0 }
  })
  await app.ready()
  t.equal(runs, 1, 'the first run, at ready()')
  const calls = Array.from({ length: 1000 }, () => app.inject('/status'))
  await new Promise((resolve) => setImmediate(resolve))
  t.equal(runs, 1, 'a thousand calls within the sample interval: the answer of the run at ready()')
  const statuses = (await Promise.all(calls)).map((res) => res.statusCode)
  t.same(new Set(statuses), new Set([200]))
  t.equal(runs, 1)
  t.equal(app.admission.stats().routes['GET /status'], undefined, 'still not gated: a probe gets the answer')
})

t.test('calls while a run is under way share it', async (t) => {
  let runs = 0
  let finish: () => void = () => {}
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, {
    rateLimit: false,
    // The shortest interval: each call finds the previous answer old, and asks for a run.
    pressure: {
      sampleInterval: 10,
      exposeStatusRoute: true,
      healthCheck: async () => {
        runs++
        if (runs > 1) await new Promise<void>((resolve) => { finish = resolve })
        return true
      }
    }
  })
  await app.ready()
  // Past the interval (unref'd waits: hold the process up).
  const hold = setInterval(() => {}, 1000)
  await new Promise((resolve) => setTimeout(resolve, 20))
  const calls = Array.from({ length: 1000 }, () => app.inject('/status'))
  while (runs < 2) await new Promise((resolve) => setImmediate(resolve))
  for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve))
  t.equal(runs, 2, 'one run for a thousand calls')
  finish()
  const statuses = (await Promise.all(calls)).map((res) => res.statusCode)
  clearInterval(hold)
  t.same(new Set(statuses), new Set([200]))
  t.equal(runs, 2)
})

t.test('a URL with a parameter or a wildcard is refused: the status route answers one path', async (t) => {
  for (const url of ['/:section', '/status/:id', '/status/*', '*', '/a::b']) {
    for (const exposeStatusRoute of [url, { url }]) {
      const app = Fastify()
      t.teardown(() => app.close())
      await t.rejects(async () => {
        await app.register(admission, { rateLimit: false, pressure: { maxRssBytes: 1e15, exposeStatusRoute } })
      }, { code: 'ADMISSION_INVALID_OPTION', path: typeof exposeStatusRoute === 'string' ? 'pressure.exposeStatusRoute' : 'pressure.exposeStatusRoute.url', message: /no `:` parameter or `\*` wildcard/ }, url)
    }
  }
})

t.test('no registration gates the status route: an outer one with a quota, an inner one with the route', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: { limit: 1, windowMs: 60_000 } })
  await app.register(async (child) => {
    await child.register(admission, { rateLimit: false, pressure: { exposeStatusRoute: true } })
  })
  app.get('/', async () => 'ok')
  await app.ready()
  const statuses: number[] = []
  for (let i = 0; i < 3; i++) statuses.push((await app.inject('/status')).statusCode)
  t.same(statuses, [200, 200, 200], 'never a 429 from the outer registration')
  t.same((await app.inject('/')).statusCode, 200)
  t.same((await app.inject('/')).statusCode, 429, 'which gates the application\'s routes')
})
