import t from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { Counter, Registry } from 'prom-client'
import admission, { type AdmissionOptions } from '../../lib/index.js'
import type { Teardown } from '../helpers/http.js'
import { childSequence, decision, flakyBackend, flakyStatuses, heldSequence, metricsApp, scrape, scriptedBackend, threeHeld, twoRoots, valueOf } from '../helpers/metrics.js'

const P = 'fastify_admission_'

const appWith = (t: Teardown, registry: Registry, options: AdmissionOptions = {}): Promise<FastifyInstance> => metricsApp(t, { registry }, options)

t.test('names, types and help follow Prometheus conventions', async (t) => {
  const registry = new Registry()
  const app = await appWith(t, registry, { maxInFlight: 4 })
  app.get('/a', async () => 'ok')
  await app.ready()
  const families = await scrape(registry)
  t.same(Object.fromEntries([...families.values()].map((f) => [f.name, f.type])), {
    [`${P}requests_total`]: 'counter',
    [`${P}refusals_total`]: 'counter',
    [`${P}attempts_total`]: 'counter',
    [`${P}in_flight_requests`]: 'gauge',
    [`${P}in_flight_limit_requests`]: 'gauge',
    [`${P}route_in_flight_requests`]: 'gauge',
    [`${P}route_in_flight_limit_requests`]: 'gauge',
    [`${P}backend_errors_total`]: 'counter',
    [`${P}backend_decision_duration_seconds`]: 'histogram'
  })
  for (const family of families.values()) {
    t.match(family.name, /^[a-z_]+$/, 'snake_case')
    t.ok(family.help.length > 0, `${family.name} has help`)
  }
  const text = await registry.metrics()
  t.match(text, /# TYPE fastify_admission_requests_total counter/)
  t.match(text, /fastify_admission_requests_total\{registration="app",route="GET \/a",outcome="admitted"\} 0/)
  t.match(text, /fastify_admission_in_flight_limit_requests\{registration="app"\} 4/)
})

t.test('memory: values after a scripted sequence, read from the gate\'s counters at the scrape', async (t) => {
  const registry = new Registry()
  const app = await appWith(t, registry, { maxInFlight: 3, rateLimit: { limit: 2, windowMs: 60_000 } })
  const { pending, release } = await heldSequence(t, app)

  let m = await scrape(registry)
  const outcome = (route: string, name: string): number | undefined => valueOf(m, `${P}requests_total`, { route, outcome: name })
  t.same([outcome('GET /a', 'admitted'), outcome('GET /a', 'limited'), outcome('GET /a', 'shed'), outcome('GET /a', 'unavailable')], [2, 1, 0, 0])
  t.same([outcome('GET /slow', 'admitted'), outcome('GET /slow', 'shed')], [1, 1])
  t.equal(outcome('404', 'limited'), 1)
  t.equal(outcome('GET /off', 'admitted'), undefined, 'an opted-out route has no series')
  t.equal(valueOf(m, `${P}route_in_flight_requests`, { route: 'GET /slow' }), 1)
  t.equal(valueOf(m, `${P}route_in_flight_requests`, { route: 'GET /a' }), 0)
  t.equal(valueOf(m, `${P}in_flight_requests`, { registration: 'app' }), 1)
  t.equal(valueOf(m, `${P}in_flight_limit_requests`, { registration: 'app' }), 3)
  t.equal(valueOf(m, `${P}route_in_flight_limit_requests`, { route: 'GET /slow' }), 1)
  t.equal(valueOf(m, `${P}route_in_flight_limit_requests`, { route: 'GET /a' }), undefined, 'only routes with a limit of their own')
  t.equal(valueOf(m, `${P}backend_errors_total`, { route: 'GET /a' }), 0)
  t.equal(valueOf(m, `${P}backend_errors_total`, { route: 'GET /slow' }), undefined, 'a route without a quota has no backend')
  t.equal(m.get(`${P}backend_decision_duration_seconds`)!.values.length, 0, 'memory decides synchronously: not timed')

  release()
  t.equal((await pending).statusCode, 200)
  m = await scrape(registry)
  t.equal(valueOf(m, `${P}in_flight_requests`, { registration: 'app' }), 0)
  t.equal(valueOf(m, `${P}route_in_flight_requests`, { route: 'GET /slow' }), 0)
  t.equal(valueOf(m, `${P}requests_total`, { route: 'GET /slow', outcome: 'admitted' }), 1, 'a scrape changes nothing: counters are not counted twice')
})

t.test('without a global limit, in flight is the sum of the routes, and no limit series', async (t) => {
  const registry = new Registry()
  const app = await appWith(t, registry, { rateLimit: false })
  const { release } = await threeHeld(app)
  const m = await scrape(registry)
  t.equal(valueOf(m, `${P}in_flight_requests`, { registration: 'app' }), 3)
  t.equal(m.get(`${P}in_flight_limit_requests`)!.values.length, 0)
  t.equal(m.get(`${P}backend_errors_total`)!.values.length, 0, 'no quota, no backend series')
  await release()
})

t.test('a backend that decides by round trip: latency observed per decision, errors counted by route', async (t) => {
  for (const onBackendError of ['deny', 'allow'] as const) {
    t.test(onBackendError, async (t) => {
      const registry = new Registry()
      const backend = flakyBackend()
      const statuses = await flakyStatuses(await appWith(t, registry, { backend, onBackendError }))
      t.same(statuses, onBackendError === 'deny' ? [200, 429, 503, 503, 503] : [200, 429, 200, 200, 200])
      const m = await scrape(registry)
      const labels = { registration: 'app' }
      t.equal(valueOf(m, `${P}backend_decision_duration_seconds_count`, labels), 4, 'every round trip that settled, failures too; a synchronous throw never started one')
      t.ok(valueOf(m, `${P}backend_decision_duration_seconds_sum`, labels)! >= 0)
      t.equal(valueOf(m, `${P}backend_decision_duration_seconds_bucket`, { ...labels, le: '+Inf' }), 4)
      t.equal(valueOf(m, `${P}backend_errors_total`, { route: 'GET /r' }), 3)
      const outcomes = ['admitted', 'limited', 'shed', 'unavailable'].map((outcome) => valueOf(m, `${P}requests_total`, { route: 'GET /r', outcome }))
      t.same(outcomes, onBackendError === 'deny' ? [1, 1, 0, 3] : [4, 1, 0, 0], 'the outcomes partition the requests')
      t.equal(backend.calls, 5)
    })
  }
})

t.test('custom buckets', async (t) => {
  const registry = new Registry()
  const backend = scriptedBackend(async () => decision(true))
  const app = await appWith(t, registry, { backend, metrics: { registry, buckets: [0.001, 60] } })
  app.get('/r', async () => 'ok')
  await app.inject('/r')
  const m = await scrape(registry)
  const les = m.get(`${P}backend_decision_duration_seconds`)!.values.filter((s) => s.metricName?.endsWith('_bucket')).map((s) => s.labels.le)
  t.same(les, [0.001, 60, '+Inf'])
  t.equal(valueOf(m, `${P}backend_decision_duration_seconds_bucket`, { le: 60 as unknown as string }), 1)
})

t.test('label cardinality is bounded: many client keys make no new series', async (t) => {
  const registry = new Registry()
  const app = await appWith(t, registry, { rateLimit: { limit: 1, windowMs: 60_000 }, key: (request) => String(request.headers['x-client']) })
  app.get('/a', async () => 'ok')
  await app.inject({ url: '/a', headers: { 'x-client': 'first' } })
  const before = (await registry.metrics()).split('\n').length
  for (let i = 0; i < 200; i++) await app.inject({ url: '/a', headers: { 'x-client': `client-${i}` } })
  for (let i = 0; i < 50; i++) await app.inject({ url: '/a', headers: { 'x-client': 'client-1' } })
  const text = await registry.metrics()
  t.equal(text.split('\n').length, before, 'the same series, other values')
  t.notMatch(text, /client-/, 'no key in any label')
  t.equal(valueOf(await scrape(registry), `${P}requests_total`, { route: 'GET /a', outcome: 'admitted' }), 201)
})

t.test('two registrations on one registry: told apart by the registration label', async (t) => {
  const registry = new Registry()
  const app = await appWith(t, registry, { rateLimit: { limit: 5, windowMs: 60_000 } })
  await childSequence(app, { registry })
  const m = await scrape(registry)
  const registrations = new Set(m.get(`${P}requests_total`)!.values.map((s) => s.labels.registration))
  t.equal(registrations.size, 2)
  const inner = String([...registrations].find((r) => r !== 'app'))
  t.match(inner, /^app\/.+@%2Fchild$/)
  t.equal(valueOf(m, `${P}requests_total`, { registration: 'app', route: 'GET /child/inner', outcome: 'admitted' }), 2, 'the outer gate admitted both')
  t.equal(valueOf(m, `${P}requests_total`, { registration: inner, route: 'GET /child/inner', outcome: 'limited' }), 1, 'the inner one limited the second')
  t.equal(valueOf(m, `${P}requests_total`, { registration: inner, route: 'GET /outer', outcome: 'admitted' }), undefined, 'the inner registration sees only its context')
})

t.test('two apps at their root on one registry: refused at registration unless one names its registration', async (t) => {
  const registry = new Registry()
  const { first, admin } = await twoRoots(t, { registry }, 'registry')
  let m = await scrape(registry)
  t.equal(valueOf(m, `${P}requests_total`, { registration: 'app', route: 'GET /a', outcome: 'admitted' }), 1)
  t.equal(valueOf(m, `${P}requests_total`, { registration: 'admin', route: 'GET /b', outcome: 'admitted' }), 1)

  // Closing one app takes its series off; the last one takes the metrics off the registry.
  await first.close()
  m = await scrape(registry)
  t.same(new Set(m.get(`${P}requests_total`)!.values.map((s) => s.labels.registration)), new Set(['admin']))
  await admin.close()
  t.equal((await registry.getMetricsAsJSON()).length, 0)
  const again = await appWith(t, registry)
  again.get('/c', async () => 'c')
  await again.inject('/c')
  t.equal(valueOf(await scrape(registry), `${P}requests_total`, { route: 'GET /c', outcome: 'admitted' }), 1, 'a later app reports there afresh')
})

t.test('a prefix of its own makes a second set of metrics on the same registry', async (t) => {
  const registry = new Registry()
  await appWith(t, registry)
  const other = Fastify()
  t.teardown(() => other.close())
  await other.register(admission, { metrics: { registry, prefix: 'edge_' } })
  await other.ready()
  t.ok(registry.getSingleMetric('edge_requests_total'))
  t.ok(registry.getSingleMetric(`${P}requests_total`))
})

t.test('names taken by something else, or other buckets, are refused at registration', async (t) => {
  const registry = new Registry()
  new Counter({ name: `${P}backend_errors_total`, help: 'the app\'s own', registers: [registry] })
  const app = Fastify()
  t.teardown(() => app.close())
  const error = await app.register(admission, { metrics: { registry } }).then(() => undefined, (e: unknown) => e)
  t.match(error, { name: 'AdmissionOptionError', path: 'metrics.prefix', value: P })
  t.match((error as Error).message, /`fastify_admission_backend_errors_total` is registered there by something else/)
  t.notOk(registry.getSingleMetric(`${P}requests_total`), 'nothing half made')

  const clean = new Registry()
  await appWith(t, clean, { metrics: { registry: clean, buckets: [0.01, 0.1] } })
  const second = Fastify()
  t.teardown(() => second.close())
  const other = await second.register(admission, { metrics: { registry: clean, registration: 'two', buckets: [0.5] } }).then(() => undefined, (e: unknown) => e)
  t.match(other, { name: 'AdmissionOptionError', path: 'metrics.buckets' })
  t.match((other as Error).message, /the buckets this registry's histogram was made with \(0\.01, 0\.1\), got \[ 0\.5 \]/)
})

t.test('a registration with metrics inside a fastify-plugin still reports', async (t) => {
  const registry = new Registry()
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fp(async (instance) => { await instance.register(admission, { metrics: { registry, registration: 'wrapped' } }) }))
  app.get('/w', async () => 'w')
  await app.inject('/w')
  t.equal(valueOf(await scrape(registry), `${P}requests_total`, { registration: 'wrapped', route: 'GET /w', outcome: 'admitted' }), 1)
})

t.test('an adaptive in-flight limit: the limit gauge is its value at the scrape, as stats() reports it', async (t) => {
  const registry = new Registry()
  const app = await appWith(t, registry, { maxInFlight: { adaptive: true, initial: 7 } })
  app.get('/a', async () => 'ok')
  await app.inject('/a')
  const m = await scrape(registry)
  t.equal(valueOf(m, `${P}in_flight_limit_requests`, { registration: 'app' }), app.admission.stats().limit)
  t.equal(valueOf(m, `${P}in_flight_limit_requests`, { registration: 'app' }), 7)
  t.equal(valueOf(m, `${P}requests_total`, { route: 'GET /a', outcome: 'admitted' }), 1)
})
