// Refusals by reason in the reporters: one refusal of each kind, read through prom-client
// (`refusals_total`) and OpenTelemetry (`refusals`) with its route and reason. And the counts
// themselves: a reason counted that no plan expected starts from 1; added up over gates in the
// order of the names; each pressure signal and queueing delay by its name.
import t from 'tap'
import { Registry } from 'prom-client'
import { metricsApp, scrape, valueOf } from '../helpers/metrics.js'
import { collect, pointsOf, sdk, valueIn } from '../helpers/opentelemetry.js'
import { REFUSAL_KINDS } from '../helpers/refusal-kinds.js'
import { SIGNALS } from '../../lib/pressure/signals.js'
import { countReason, expectReasons, reasonRecord, SHED_REASONS, type ReasonCounts } from '../../lib/metrics/reasons.js'

t.test('counted, expected at 0, added up over gates in the order of the names', async (t) => {
  const one: ReasonCounts = new Map()
  const two: ReasonCounts = new Map()
  expectReasons(one, ['quota:default', 'in-flight'])
  countReason(one, 'in-flight')
  countReason(two, 'queue-delay')
  expectReasons(two, ['queue-delay', 'in-flight'])
  t.same(reasonRecord([one]), { 'in-flight': 1, 'quota:default': 0 })
  t.same(reasonRecord([one, two]), { 'in-flight': 1, 'queue-delay': 1, 'quota:default': 0 }, 'expecting a reason counted already keeps its count')
  t.same(reasonRecord([]), {})
})

t.test('a pressure shed\'s reason: the signal by its name, or queueing delay', async (t) => {
  for (const signal of SIGNALS) t.equal(SHED_REASONS[signal], `pressure:${signal}`, signal)
  t.equal(SHED_REASONS.queueDelay, 'queue-delay')
})

for (const kind of REFUSAL_KINDS) {
  t.test(`${kind.reason}: in prom-client's refusals_total and OpenTelemetry's refusals, by route and reason`, async (t) => {
    const registry = new Registry()
    const prom = kind.scene()
    const promApp = await metricsApp(t, { registry }, prom.options)
    t.equal(await prom.refuse(promApp), kind.status)
    const families = await scrape(registry)
    t.equal(valueOf(families, 'fastify_admission_refusals_total', { registration: 'app', route: kind.route, reason: kind.reason }), 1, 'prom-client')
    t.equal(families.get('fastify_admission_refusals_total')!.values.reduce((sum, sample) => sum + sample.value, 0), 1, 'one refusal in all')

    const { provider, reader } = sdk()
    const otel = kind.scene()
    const otelApp = await metricsApp(t, { meter: provider.getMeter('app') }, otel.options)
    t.equal(await otel.refuse(otelApp), kind.status)
    const metrics = await collect(reader)
    t.equal(valueIn(metrics, 'fastify.admission.refusals', { 'fastify.admission.registration': 'app', 'fastify.admission.route': kind.route, 'fastify.admission.reason': kind.reason }), 1, 'OpenTelemetry')
    t.equal(pointsOf(metrics, 'fastify.admission.refusals').reduce((sum, point) => sum + (point.value as number), 0), 1, 'one refusal in all')
  })
}
