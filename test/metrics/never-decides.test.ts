// Reporting never changes a decision: a histogram that throws leaves every decision as it was, and
// metrics keep what the backend's limiters can do (a route's `charge`). Regression tests: with a
// throwing histogram every round-trip decision became a backend failure (503 for all, or all
// admitted with onBackendError: 'allow'); with metrics on, a route's charge was refused at
// registration on a backend whose limiters charge.
import t, { type Test } from 'tap'
import Fastify from 'fastify'
import { MeterProvider } from '@opentelemetry/sdk-metrics'
import { Registry } from 'prom-client'
import admission, { memoryBackend } from '../../lib/index.js'
import type { AdmissionOptions, RatesBackend } from '../../lib/index.js'

/** A backend whose limiters decide by promise only, as Redis's do (memory underneath, charges included). */
function roundTrips (): RatesBackend {
  const inner = memoryBackend()
  return {
    kind: 'round-trips',
    stop: async () => { await inner.stop() },
    stack: (address, policies) => {
      const stack = inner.stack!(address, policies)
      return {
        policies,
        consume: async (identity, cost) => await stack.consume(identity, cost),
        check: async (identity, cost) => await stack.check(identity, cost),
        charge: async (identity, units) => await stack.charge!(identity, units),
        state: async (identity) => await stack.state(identity),
        delete: async (identity) => await stack.delete(identity)
      }
    },
    limiter: (address, policy) => {
      const limiter = inner.limiter(address, policy)
      return {
        policy: limiter.policy,
        consume: async (identity, cost) => await limiter.consume(identity, cost),
        charge: async (identity, units, returnBy) => await limiter.charge!(identity, units, returnBy),
        now: () => limiter.now!(),
        state: async (identity) => await limiter.state(identity),
        delete: async (identity) => await limiter.delete(identity)
      }
    }
  }
}

/** An SDK Meter whose histograms throw at every record. */
function throwingMeter (): ReturnType<MeterProvider['getMeter']> {
  const meter = new MeterProvider().getMeter('app')
  const create = meter.createHistogram.bind(meter)
  meter.createHistogram = ((...args: Parameters<typeof create>) => {
    const histogram = create(...args)
    histogram.record = () => { throw new Error('the exporter broke') }
    return histogram
  }) as typeof meter.createHistogram
  return meter
}

async function statuses (t: Test, options: AdmissionOptions, lines: string[]): Promise<number[]> {
  const app = Fastify({ logger: { level: 'error', stream: { write: (line: string) => { lines.push(line) } } } })
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: { limit: 2, windowMs: 60_000 }, ...options })
  app.get('/', async () => 'ok')
  await app.ready()
  const answers: number[] = []
  for (let i = 0; i < 5; i++) answers.push((await app.inject('/')).statusCode)
  return answers
}

t.test('a histogram that throws changes no decision', async (t) => {
  for (const onBackendError of ['deny', 'allow'] as const) {
    const lines: string[] = []
    const answers = await statuses(t, { backend: roundTrips(), onBackendError, metrics: { meter: throwingMeter() } }, lines)
    t.same(answers, [200, 200, 429, 429, 429], `onBackendError: '${onBackendError}': a limit of 2 admits 2`)
    const logged = lines.filter((line) => line.includes('the decision duration histogram'))
    t.equal(logged.length, 1, 'logged once')
    t.match(logged[0], /the exporter broke/)
  }
})

t.test("metrics keep a backend's charge: a route charges after its response with metrics on", async (t) => {
  for (const metrics of [{ registry: new Registry() }, { meter: new MeterProvider().getMeter('app') }]) {
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(admission, { backend: roundTrips(), metrics, key: () => 'one', rateLimit: { limit: 10, windowMs: 60_000 } })
    app.get('/', { config: { admission: { charge: () => 6 } } }, async () => 'ok')
    await app.ready()
    t.equal((await app.inject('/')).statusCode, 200)
    const second = await app.inject('/')
    t.equal(second.statusCode, 200)
    t.match(second.headers.ratelimit, /r=3\b/, '1 taken up front, 5 more charged after the first response: 10 − 6 − 1')
  }
  const stacked = Fastify()
  t.teardown(() => stacked.close())
  await stacked.register(admission, { backend: roundTrips(), metrics: { registry: new Registry() }, key: () => 'one', rateLimit: [{ limit: 10, windowMs: 60_000, name: 'minute' }, { limit: 100, windowMs: 3_600_000, name: 'hour' }] })
  stacked.get('/', { config: { admission: { charge: () => 6 } } }, async () => 'ok')
  await stacked.ready()
  t.equal((await stacked.inject('/')).statusCode, 200, 'a stacked policy with metrics registers and charges too')
  const after = await stacked.inject('/')
  t.equal(after.statusCode, 200)
  t.match(after.headers.ratelimit, /"minute";r=3\b/, 'the stack was charged: 10 − 6 − 1')
})
