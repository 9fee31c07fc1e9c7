import t from 'tap'
import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import Fastify from 'fastify'
import { Registry } from 'prom-client'
import admission, { DECISION_CHANNEL, redisBackend, type AdmissionDecisionEvent } from '../../lib/index.js'
import { deleteKeys, sharedRedis, uniquePrefix } from '../backends/redis/helpers.js'
import { scrape, valueOf } from '../helpers/metrics.js'

// Metrics and events with the gate on a real Redis (the shared server, a prefix of this test's own).

const shared = await sharedRedis()

t.test('Redis: every round trip in the histogram, outcomes counted, events carry the key', { skip: 'skip' in shared && shared.skip }, async (t) => {
  if (!('redis' in shared)) return
  const redis = shared.redis
  t.teardown(() => redis.quit())
  const prefix = uniquePrefix('metrics')
  t.teardown(async () => { await deleteKeys(redis, prefix) })
  const seen: AdmissionDecisionEvent[] = []
  const listener = (message: unknown): void => { seen.push(message as AdmissionDecisionEvent) }
  subscribe(DECISION_CHANNEL, listener)
  t.teardown(() => { unsubscribe(DECISION_CHANNEL, listener) })
  const registry = new Registry()
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, {
    // No deny cache: each decision is a round trip.
    backend: redisBackend({ client: redis, prefix, timeoutMs: 2000, denyCache: false }),
    rateLimit: { limit: 2, windowMs: 3_600_000 },
    key: (request) => String(request.headers['x-id']),
    metrics: { registry }
  })
  app.get('/r', async () => 'ok')
  const statuses = []
  for (const id of ['a', 'a', 'a', 'b']) statuses.push((await app.inject({ url: '/r', headers: { 'x-id': id } })).statusCode)
  t.same(statuses, [200, 200, 429, 200])
  const m = await scrape(registry)
  t.equal(valueOf(m, 'fastify_admission_backend_decision_duration_seconds_count', { registration: 'app' }), 4)
  t.ok(valueOf(m, 'fastify_admission_backend_decision_duration_seconds_sum', { registration: 'app' })! > 0, 'a round trip takes time')
  t.same(['admitted', 'limited', 'shed', 'unavailable'].map((outcome) => valueOf(m, 'fastify_admission_requests_total', { route: 'GET /r', outcome })), [3, 1, 0, 0])
  t.equal(valueOf(m, 'fastify_admission_backend_errors_total', { route: 'GET /r' }), 0)
  t.same(seen.map((e) => [e.outcome, e.key, e.status]), [['admitted', 'a', undefined], ['admitted', 'a', undefined], ['limited', 'a', 429], ['admitted', 'b', undefined]])
  t.notMatch(await registry.metrics(), /x-id|"a"|"b"/, 'no key in the metrics')
})
