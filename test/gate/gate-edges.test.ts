import t from 'tap'
import Fastify from 'fastify'
import admission from '../../lib/index.js'
import type { RatesBackend } from '../../lib/rates/backend.js'
import { Slots } from '../../lib/gate/permits.js'
import type { RouteGate } from '../../lib/gate/route-gate.js'
import { newCounters } from '../../lib/gate/stats.js'

t.test('a backend error other than RATES_UNAVAILABLE is a 500, and the slot comes back', async (t) => {
  const broken: RatesBackend = {
    kind: 'broken',
    limiter: (_address, policy) => ({ policy, consume: async () => { throw new Error('a bug in the backend') } }),
    stop: async () => {}
  }
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { maxInFlight: 1, backend: broken, onBackendError: 'allow' })
  app.get('/', async () => 'never')
  const res = await app.inject('/')
  t.equal(res.statusCode, 500, 'not admitted, not a silent allow: it is not an unavailability the app chose to allow')
  t.match(res.json(), { message: 'a bug in the backend' })
  t.match(app.admission.stats(), { inFlight: 0, admitted: 0, unavailable: 0 })
})

t.test('two routes with one name (constraints) count together', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: false })
  app.get('/', { constraints: { version: '1.0.0' } }, async () => 'v1')
  app.get('/', { constraints: { version: '2.0.0' } }, async () => 'v2')
  t.equal((await app.inject({ url: '/', headers: { 'accept-version': '1.x' } })).body, 'v1')
  t.equal((await app.inject({ url: '/', headers: { 'accept-version': '2.x' } })).body, 'v2')
  t.equal(app.admission.stats().routes['GET /']!.admitted, 2)
})

t.test('Slots.free gives back once: a second call changes nothing', async (t) => {
  const fastify = { decorateRequest: () => {} } as never
  const global = newCounters()
  const gate = { counters: newCounters(), maxInFlight: 0 } as unknown as RouteGate
  const slots = new Slots(fastify, global, 2, gate)
  const request = {} as never
  t.ok(slots.take(request, gate))
  t.equal(global.inFlight, 1)
  slots.free(request)
  slots.free(request)
  t.equal(global.inFlight, 0)
  t.equal(gate.counters.inFlight, 0)
})
