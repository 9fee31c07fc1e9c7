// Admissions and sheds by attempt (`retries`, on by default) in both reporters: a first attempt
// holds the only slot, a retry is shed, then a retry and a first attempt are admitted. And with
// `retries: false`, no series at all.
import t, { type Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { Registry } from 'prom-client'
import { held, metricsApp, permitsTaken, scrape, valueOf } from '../helpers/metrics.js'
import { collect, pointsOf, sdk, valueIn } from '../helpers/opentelemetry.js'

const RETRY = { 'retry-attempt': '2' }

/** The sequence on `app` (`maxInFlight: 1`): first admitted and held, a retry shed, then a retry and a first attempt admitted. */
async function sequence (t: Test, app: FastifyInstance): Promise<void> {
  const slow = held()
  app.get('/', async () => { await slow.gate; return 'ok' })
  const first = app.inject('/')
  await permitsTaken()
  t.equal((await app.inject({ url: '/', headers: RETRY })).statusCode, 503, 'the retry finds the gate full')
  slow.release()
  t.equal((await first).statusCode, 200)
  t.equal((await app.inject({ url: '/', headers: RETRY })).statusCode, 200)
  t.equal((await app.inject('/')).statusCode, 200)
}

const EXPECTED = [['first', 'admitted', 2], ['first', 'shed', 0], ['retry', 'admitted', 1], ['retry', 'shed', 1]] as const

t.test('prom-client: attempts_total by attempt and outcome', async (t) => {
  const registry = new Registry()
  const app = await metricsApp(t, { registry }, { maxInFlight: 1, rateLimit: false })
  await sequence(t, app)
  const families = await scrape(registry)
  for (const [attempt, outcome, count] of EXPECTED) t.equal(valueOf(families, 'fastify_admission_attempts_total', { registration: 'app', attempt, outcome }), count, `${attempt} ${outcome}`)
  t.same(app.admission.stats().attempts, { first: { admitted: 2, shed: 0 }, retries: { admitted: 1, shed: 1 } }, 'as stats() counts them')
})

t.test('OpenTelemetry: attempts by attempt and outcome', async (t) => {
  const { provider, reader } = sdk()
  const app = await metricsApp(t, { meter: provider.getMeter('app') }, { maxInFlight: 1, rateLimit: false })
  await sequence(t, app)
  const metrics = await collect(reader)
  for (const [attempt, outcome, count] of EXPECTED) {
    t.equal(valueIn(metrics, 'fastify.admission.attempts', { 'fastify.admission.registration': 'app', 'fastify.admission.attempt': attempt, 'fastify.admission.outcome': outcome }), count, `${attempt} ${outcome}`)
  }
})

t.test('retries: false: no attempts series in either reporter', async (t) => {
  const registry = new Registry()
  const promApp = await metricsApp(t, { registry }, { maxInFlight: 1, rateLimit: false, retries: false })
  await promApp.inject('/nowhere')
  t.same((await scrape(registry)).get('fastify_admission_attempts_total')?.values ?? [], [])
  const { provider, reader } = sdk()
  const otelApp = await metricsApp(t, { meter: provider.getMeter('app') }, { maxInFlight: 1, rateLimit: false, retries: false })
  await otelApp.inject('/nowhere')
  t.same(pointsOf(await collect(reader), 'fastify.admission.attempts'), [])
})
