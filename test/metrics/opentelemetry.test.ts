import t from 'tap'
import { readFileSync } from 'node:fs'
import Fastify, { type FastifyInstance } from 'fastify'
import { metrics as otel } from '@opentelemetry/api'
import {
  AggregationTemporality, DataPointType, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader,
  type Histogram, type MetricData
} from '@opentelemetry/sdk-metrics'
import admission, { type AdmissionOptions } from '../../lib/index.js'
import type { MetricsMeter } from '../../lib/metrics/meter.js'
import type { Teardown } from '../helpers/http.js'
import { byName, collect, pointsOf, sdk, TestReader, valueIn } from '../helpers/opentelemetry.js'
import { childSequence, decision, flakyBackend, flakyStatuses, heldSequence, metricsApp, scriptedBackend, threeHeld, twoRoots } from '../helpers/metrics.js'

const P = 'fastify.admission.'
const REGISTRATION = 'fastify.admission.registration'
const ROUTE = 'fastify.admission.route'
const OUTCOME = 'fastify.admission.outcome'
const POLICY = 'fastify.admission.policy'

const appWith = (t: Teardown, meter: MetricsMeter, options: AdmissionOptions = {}): Promise<FastifyInstance> => metricsApp(t, { meter }, options)

/** Requests of `route` with each outcome: admitted, limited, shed, unavailable. */
function outcomes (m: Map<string, MetricData>, route: string, registration = 'app'): unknown[] {
  return ['admitted', 'limited', 'shed', 'unavailable'].map((outcome) => valueIn(m, `${P}requests`, { [REGISTRATION]: registration, [ROUTE]: route, [OUTCOME]: outcome }))
}

t.test('instruments: names, kinds and units in the aspnetcore.rate_limiting style', async (t) => {
  const { provider, reader } = sdk()
  const app = await appWith(t, provider.getMeter('app'), { maxInFlight: 4 })
  app.get('/a', async () => 'ok')
  await app.inject('/a')
  const m = await collect(reader)
  // What an exporter sees: a monotonic sum is a counter, a sum that is not an up-down counter.
  const kind = (metric: MetricData): string => metric.dataPointType === DataPointType.SUM ? (metric.isMonotonic ? 'counter' : 'up-down counter') : DataPointType[metric.dataPointType]
  const described = Object.fromEntries([...m.values()].map((metric) => [metric.descriptor.name, [kind(metric), metric.descriptor.unit]]))
  t.same(described, {
    [`${P}requests`]: ['counter', '{request}'],
    [`${P}refusals`]: ['counter', '{request}'],
    [`${P}attempts`]: ['counter', '{request}'],
    [`${P}active_requests`]: ['up-down counter', '{request}'],
    [`${P}in_flight_limit`]: ['GAUGE', '{request}'],
    [`${P}route.active_requests`]: ['up-down counter', '{request}'],
    [`${P}backend.errors`]: ['counter', '{error}']
  }, 'instruments with no point yet are not exported: no route limit, no round trip')
  for (const metric of m.values()) t.ok(metric.descriptor.description.length > 0, `${metric.descriptor.name} has a description`)
  const admitted = pointsOf(m, `${P}requests`, { [OUTCOME]: 'admitted' }).map((point) => point.attributes)
  t.same(admitted.sort((a, b) => String(a[ROUTE]).localeCompare(String(b[ROUTE]))), [
    { [REGISTRATION]: 'app', [ROUTE]: '404', [POLICY]: 'default', [OUTCOME]: 'admitted' },
    { [REGISTRATION]: 'app', [ROUTE]: 'GET /a', 'http.route': '/a', [POLICY]: 'default', [OUTCOME]: 'admitted' }
  ], 'a declared route has its template as http.route; the requests that matched none have none')
  t.equal(valueIn(m, `${P}in_flight_limit`, { [REGISTRATION]: 'app' }), 4)
})

t.test('memory: what a collection sees after admitted, limited and shed requests, and during a held one', async (t) => {
  const { provider, reader } = sdk()
  const app = await appWith(t, provider.getMeter('app'), { maxInFlight: 3, rateLimit: { limit: 2, windowMs: 60_000 } })
  const { pending, release } = await heldSequence(t, app)

  let m = await collect(reader)
  t.same(outcomes(m, 'GET /a'), [2, 1, 0, 0])
  t.same(outcomes(m, 'GET /slow').slice(0, 3), [1, 0, 1])
  t.notOk(pointsOf(m, `${P}requests`, { [ROUTE]: 'GET /slow' }).some((point) => POLICY in point.attributes), 'a route without a rate limit has no policy attribute')
  t.equal(valueIn(m, `${P}requests`, { [ROUTE]: '404', [OUTCOME]: 'limited' }), 1)
  t.same(pointsOf(m, `${P}requests`, { [ROUTE]: 'GET /off' }), [], 'an opted-out route has no series')
  t.equal(valueIn(m, `${P}active_requests`, { [REGISTRATION]: 'app' }), 1, 'the held request')
  t.equal(valueIn(m, `${P}route.active_requests`, { [ROUTE]: 'GET /slow' }), 1)
  t.equal(valueIn(m, `${P}route.active_requests`, { [ROUTE]: 'GET /a' }), 0)
  t.equal(valueIn(m, `${P}in_flight_limit`, { [REGISTRATION]: 'app' }), 3)
  t.equal(valueIn(m, `${P}route.in_flight_limit`, { [ROUTE]: 'GET /slow', 'http.route': '/slow' }), 1)
  t.equal(valueIn(m, `${P}route.in_flight_limit`, { [ROUTE]: 'GET /a' }), undefined, 'only routes with a limit of their own')
  t.equal(valueIn(m, `${P}backend.errors`, { [ROUTE]: 'GET /a', [POLICY]: 'default' }), 0)
  t.equal(valueIn(m, `${P}backend.errors`, { [ROUTE]: 'GET /slow' }), undefined, 'a route without a quota has no backend')
  t.notOk(m.has(`${P}backend.decision.duration`), 'memory decides synchronously: not timed')

  release()
  t.equal((await pending).statusCode, 200)
  m = await collect(reader)
  t.equal(valueIn(m, `${P}active_requests`, { [REGISTRATION]: 'app' }), 0)
  t.equal(valueIn(m, `${P}route.active_requests`, { [ROUTE]: 'GET /slow' }), 0)
  t.same(outcomes(m, 'GET /a'), [2, 1, 0, 0], 'a collection changes nothing: counters are not counted twice')
})

t.test('without a global limit, in flight is the sum of the routes, and no limit point', async (t) => {
  const { provider, reader } = sdk()
  const app = await appWith(t, provider.getMeter('app'), { rateLimit: false })
  const { release } = await threeHeld(app)
  const m = await collect(reader)
  t.equal(valueIn(m, `${P}active_requests`, { [REGISTRATION]: 'app' }), 3)
  t.same(pointsOf(m, `${P}in_flight_limit`), [])
  t.same(pointsOf(m, `${P}backend.errors`), [], 'no quota, no backend points')
  await release()
})

t.test('a backend that decides by round trip: its latency in the histogram, its errors counted by route', async (t) => {
  for (const onBackendError of ['deny', 'allow'] as const) {
    t.test(onBackendError, async (t) => {
      const { provider, reader } = sdk()
      const backend = flakyBackend()
      const statuses = await flakyStatuses(await appWith(t, provider.getMeter('app'), { backend, onBackendError }))
      t.same(statuses, onBackendError === 'deny' ? [200, 429, 503, 503, 503] : [200, 429, 200, 200, 200])
      const m = await collect(reader)
      const duration = m.get(`${P}backend.decision.duration`)!
      t.equal(duration.dataPointType, DataPointType.HISTOGRAM)
      t.equal(duration.descriptor.unit, 's')
      t.same(duration.dataPoints.map((point) => point.attributes), [{ [REGISTRATION]: 'app' }], 'one series per registration')
      const histogram = duration.dataPoints[0]!.value as Histogram
      t.equal(histogram.count, 4, 'every round trip that settled, failures too; a synchronous throw never started one')
      t.ok(histogram.sum! >= 0)
      t.same(histogram.buckets.boundaries, [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5], 'the default buckets, as advice')
      t.equal(valueIn(m, `${P}backend.errors`, { [ROUTE]: 'GET /r', [POLICY]: 'default' }), 3)
      t.same(outcomes(m, 'GET /r'), onBackendError === 'deny' ? [1, 1, 0, 3] : [4, 1, 0, 0], 'the outcomes partition the requests')
      t.equal(backend.calls, 5)
    })
  }
})

t.test('custom buckets are the histogram\'s boundaries', async (t) => {
  const { provider, reader } = sdk()
  const backend = scriptedBackend(async () => decision(true))
  const app = await appWith(t, provider.getMeter('app'), { backend, metrics: { meter: provider.getMeter('app'), buckets: [0.001, 60] } })
  app.get('/r', async () => 'ok')
  await app.inject('/r')
  const histogram = valueIn(await collect(reader), `${P}backend.decision.duration`) as Histogram
  t.same(histogram.buckets.boundaries, [0.001, 60])
  t.equal(histogram.count, 1)
})

t.test('attributes are bounded: many client keys make no new series, and no attribute holds one', async (t) => {
  const { provider, reader } = sdk()
  const app = await appWith(t, provider.getMeter('app'), { rateLimit: { limit: 1, windowMs: 60_000 }, key: (request) => String(request.headers['x-client']) })
  app.get('/a', async () => 'ok')
  await app.inject({ url: '/a', headers: { 'x-client': 'early-bird' } })
  const count = (m: Map<string, MetricData>): number => [...m.values()].reduce((sum, metric) => sum + metric.dataPoints.length, 0)
  const before = count(await collect(reader))
  for (let i = 0; i < 200; i++) await app.inject({ url: '/a?id=' + i, headers: { 'x-client': `client-${i}` } })
  for (let i = 0; i < 50; i++) await app.inject({ url: '/a', headers: { 'x-client': 'client-1' } })
  const m = await collect(reader)
  t.equal(count(m), before, 'the same series, other values')
  const values = [...m.values()].flatMap((metric) => metric.dataPoints.flatMap((point) => Object.values(point.attributes)))
  t.notOk(values.some((value) => /client-|early-bird|id=/.test(String(value))), 'no key, no raw URL in any attribute')
  t.same(outcomes(m, 'GET /a').slice(0, 2), [201, 50])
})

t.test('the policy attribute: the names RateLimit-Policy lists, joined for a stack; a tier\'s own; a tiered route\'s tiers', async (t) => {
  const { provider, reader } = sdk()
  const app = await appWith(t, provider.getMeter('app'), { rateLimit: { limit: 100, windowMs: 60_000 } })
  app.get('/stack', { config: { admission: { rateLimit: [{ limit: 10, windowMs: 1000 }, { limit: 1000, windowMs: 86_400_000, name: 'daily' }] } } }, async () => 'ok')
  app.get('/named', { config: { admission: { rateLimit: [{ limit: 10, windowMs: 1000, name: 'burst' }] } } }, async () => 'ok')
  app.get('/tiers', {
    config: {
      admission: {
        rateLimit: {
          tiers: { free: { limit: 1, windowMs: 60_000 }, pro: [{ limit: 5, windowMs: 1000 }, { limit: 100, windowMs: 86_400_000, name: 'daily' }] },
          tier: (request) => request.headers['x-tier'] === 'pro' ? 'pro' : 'free'
        }
      }
    }
  }, async () => 'ok')
  await app.inject('/stack')
  await app.inject('/named')
  await app.inject('/tiers')
  await app.inject('/tiers')
  await app.inject({ url: '/tiers', headers: { 'x-tier': 'pro' } })
  const m = await collect(reader)
  const policyOf = (route: string): unknown => pointsOf(m, `${P}requests`, { [ROUTE]: route, [OUTCOME]: 'admitted' })[0]?.attributes[POLICY]
  t.equal(policyOf('GET /stack'), 'per-1s,daily')
  t.equal(policyOf('GET /named'), 'burst')
  t.equal(policyOf('GET /tiers'), 'free,pro', 'the route\'s own gate counts what happens before a tier is picked')
  t.equal(policyOf('GET /tiers (tier free)'), 'free')
  t.equal(policyOf('GET /tiers (tier pro)'), 'pro-per-1s,pro-daily')
  t.same(outcomes(m, 'GET /tiers (tier free)').slice(0, 2), [1, 1])
  t.equal(valueIn(m, `${P}requests`, { [ROUTE]: 'GET /tiers (tier pro)', 'http.route': '/tiers', [OUTCOME]: 'admitted' }), 1, 'a tier\'s series have the route\'s template')
})

t.test('two registrations on one Meter: told apart by the registration attribute', async (t) => {
  const { provider, reader } = sdk()
  const meter = provider.getMeter('app')
  const app = await appWith(t, meter, { rateLimit: { limit: 5, windowMs: 60_000 } })
  await childSequence(app, { meter })
  const m = await collect(reader)
  const registrations = new Set(pointsOf(m, `${P}requests`).map((point) => point.attributes[REGISTRATION]))
  t.equal(registrations.size, 2)
  const inner = String([...registrations].find((r) => r !== 'app'))
  t.match(inner, /^app\/.+@%2Fchild$/)
  t.equal(outcomes(m, 'GET /child/inner')[0], 2, 'the outer gate admitted both')
  t.equal(outcomes(m, 'GET /child/inner', inner)[1], 1, 'the inner one limited the second')
  t.same(pointsOf(m, `${P}requests`, { [REGISTRATION]: inner, [ROUTE]: 'GET /outer' }), [], 'the inner registration sees only its context')
})

t.test('two apps at their root on one Meter: refused unless one names its registration; a closed app\'s callback is detached', async (t) => {
  // Delta temporality, exported as an app would (a periodic reader, flushed here): a series whose
  // callback is gone reports nothing more.
  const exporter = new InMemoryMetricExporter(AggregationTemporality.DELTA)
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 })
  const provider = new MeterProvider({ readers: [reader] })
  t.teardown(() => provider.shutdown())
  const meter = provider.getMeter('app')
  const exported = async (): Promise<Map<string, MetricData>> => {
    exporter.reset()
    await reader.forceFlush()
    const last = exporter.getMetrics().at(-1)
    return last === undefined ? new Map() : byName(last)
  }
  const { first, admin } = await twoRoots(t, { meter }, 'Meter')
  let m = await exported()
  t.equal(outcomes(m, 'GET /a')[0], 1)
  t.equal(outcomes(m, 'GET /b', 'admin')[0], 1)

  await first.close()
  await admin.inject('/b')
  m = await exported()
  t.same(new Set(pointsOf(m, `${P}requests`).map((point) => point.attributes[REGISTRATION])), new Set(['admin']), 'the closed app reports nothing more')
  t.equal(outcomes(m, 'GET /b', 'admin')[0], 1, 'a delta: the one request since the last export')
  await admin.close()
  m = await exported()
  t.same(pointsOf(m, `${P}requests`), [], 'no callback is left on the Meter')

  const again = await appWith(t, meter)
  again.get('/c', async () => 'c')
  await again.inject('/c')
  t.equal(outcomes(await exported(), 'GET /c')[0], 1, 'a later app at the root reports there again')
})

t.test('other buckets on a Meter and prefix already in use are refused; another prefix is another set', async (t) => {
  const { provider, reader } = sdk()
  const meter = provider.getMeter('app')
  await appWith(t, meter, { metrics: { meter, buckets: [0.01, 0.1] } })
  const second = Fastify()
  t.teardown(() => second.close())
  const other = await second.register(admission, { metrics: { meter, registration: 'two', buckets: [0.5] } }).then(() => undefined, (e: unknown) => e)
  t.match(other, { name: 'AdmissionOptionError', path: 'metrics.buckets' })
  t.match((other as Error).message, /the buckets this Meter's histogram was made with \(0\.01, 0\.1\), got \[ 0\.5 \]/)

  const edge = Fastify()
  t.teardown(() => edge.close())
  await edge.register(admission, { metrics: { meter, prefix: 'edge.gate_', buckets: [0.5] } })
  edge.get('/e', async () => 'e')
  await edge.inject('/e')
  const m = await collect(reader)
  t.equal(valueIn(m, 'edge.gate_requests', { [ROUTE]: 'GET /e', [OUTCOME]: 'admitted' }), 1)
  t.ok(m.has(`${P}requests`))
})

t.test('an adaptive in-flight limit: the limit gauge is its value at the collection, as stats() reports it', async (t) => {
  const { provider, reader } = sdk()
  const app = await appWith(t, provider.getMeter('app'), { maxInFlight: { adaptive: true, initial: 7 } })
  app.get('/a', async () => 'ok')
  await app.inject('/a')
  const m = await collect(reader)
  t.equal(valueIn(m, `${P}in_flight_limit`, { [REGISTRATION]: 'app' }), app.admission.stats().limit)
  t.equal(valueIn(m, `${P}in_flight_limit`, { [REGISTRATION]: 'app' }), 7)
})

t.test('a Meter of @opentelemetry/api with no SDK registered: the plugin works and reports nowhere', async (t) => {
  const meter = otel.getMeter('no-sdk')
  const backend = scriptedBackend(async () => decision(true))
  const app = await appWith(t, meter, { maxInFlight: 2, backend })
  app.get('/a', async () => 'ok')
  t.same([(await app.inject('/a')).statusCode, (await app.inject('/a')).statusCode], [200, 200])
  t.equal(app.admission.stats().routes['GET /a']!.admitted, 2)
  await app.close()
  const again = await appWith(t, meter, { maxInFlight: 2 })
  again.get('/a', async () => 'ok')
  t.equal((await again.inject('/a')).statusCode, 200, 'no registration is remembered as a clash once closed')
})

t.test('the built package never loads @opentelemetry/api: the Meter the app passes makes the instruments', async (t) => {
  // No import, require or type import of it (prose naming the package in a message or a comment is fine).
  const loads = /(?:\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*)['"]@opentelemetry\//
  t.ok(loads.test("import('@opentelemetry/api')") && loads.test('} from "@opentelemetry/api"') && loads.test("require( '@opentelemetry/api')"), 'the check finds them')
  for (const file of ['dist/index.js', 'dist/index.cjs', 'dist/index.d.ts', 'dist/index.d.cts']) {
    t.notMatch(readFileSync(file, 'utf8'), loads, file)
  }
})
