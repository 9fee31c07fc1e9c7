// Type tests of the metrics option and the decision events, on the published declarations.
import { subscribe } from 'node:diagnostics_channel'
import Fastify from 'fastify'
import { Registry, register } from 'prom-client'
import { metrics } from '@opentelemetry/api'
import { MeterProvider } from '@opentelemetry/sdk-metrics'
import admission, {
  DECISION_CHANNEL, type AdmissionDecisionEvent, type AdmissionOptions
} from 'fastify-admission'

// The option's types are members of the options' type, not names of their own.
type AdmissionMetricsOptions = NonNullable<AdmissionOptions['metrics']>
type PrometheusMetricsOptions = Extract<AdmissionMetricsOptions, { registry: unknown }>
type OpenTelemetryMetricsOptions = Extract<AdmissionMetricsOptions, { meter: unknown }>
type MetricsMeter = OpenTelemetryMetricsOptions['meter']
type AdmissionOutcome = AdmissionDecisionEvent['outcome']

const app = Fastify()
await app.register(admission, { metrics: { registry: new Registry() } })
await app.register(admission, { metrics: { registry: register, prefix: 'edge_', registration: 'edge', buckets: [0.001, 0.01, 0.1] } })
const options: AdmissionMetricsOptions = { registry: new Registry() }
const prometheus: PrometheusMetricsOptions = { registry: register, prefix: 'edge_' }
void options; void prometheus

// An OpenTelemetry Meter of the API (no SDK: a no-op one) or of an SDK's MeterProvider, by shape.
await app.register(admission, { metrics: { meter: metrics.getMeter('my-app') } })
await app.register(admission, { metrics: { meter: new MeterProvider().getMeter('my-app', '1.0.0'), prefix: 'edge.', registration: 'edge', buckets: [0.001, 0.01] } })
const meter: MetricsMeter = metrics.getMeter('my-app')
const otel: OpenTelemetryMetricsOptions = { meter }
const either: AdmissionMetricsOptions = otel
void either

// @ts-expect-error a registry or a meter, not both
await app.register(admission, { metrics: { registry: register, meter } })
// @ts-expect-error something that is not a Meter
await app.register(admission, { metrics: { meter: { createHistogram () {} } } })

// @ts-expect-error a registry is needed
await app.register(admission, { metrics: {} })
// @ts-expect-error something that is not a registry
await app.register(admission, { metrics: { registry: { metrics: () => '' } } })
// @ts-expect-error buckets are numbers
await app.register(admission, { metrics: { registry: register, buckets: ['0.1'] } })

const channel: 'fastify-admission:decision' = DECISION_CHANNEL
void channel
subscribe(DECISION_CHANNEL, (message) => {
  const event = message as AdmissionDecisionEvent
  const outcome: AdmissionOutcome = event.outcome
  const status: 429 | 503 | undefined = event.status
  const key: string | undefined = event.key
  const id: string = event.request.id
  void outcome; void status; void key; void id
  // @ts-expect-error events are read-only
  event.outcome = 'admitted'
})
