// Type tests of the metrics option and the decision events, on the published declarations.
import { subscribe } from 'node:diagnostics_channel'
import Fastify from 'fastify'
import { Registry, register } from 'prom-client'
import admission, { DECISION_CHANNEL, type AdmissionDecisionEvent, type AdmissionMetricsOptions, type AdmissionOutcome } from 'fastify-admission'

const app = Fastify()
await app.register(admission, { metrics: { registry: new Registry() } })
await app.register(admission, { metrics: { registry: register, prefix: 'edge_', registration: 'edge', buckets: [0.001, 0.01, 0.1] } })
const options: AdmissionMetricsOptions = { registry: new Registry() }
void options

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
