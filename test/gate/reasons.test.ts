// A reason for every refusal: which step refused it, counted on the route that refused it and over
// the registration (`stats().reasons`), and said in the decision event — one refusal of each kind.
// Every reason a route's plan can refuse for is there from the start, at 0; none it cannot.
import t from 'tap'
import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import Fastify from 'fastify'
import admission, { DECISION_CHANNEL, memoryBackend, type AdmissionDecisionEvent, type RatesBackend } from '../../lib/index.js'
import { fleetOfTwo, REFUSAL_KINDS } from '../helpers/refusal-kinds.js'
import { byPromise } from './limits-backends.js'

for (const kind of REFUSAL_KINDS) {
  t.test(`${kind.reason}: counted on ${kind.route} and over the registration, said in the decision event`, async (t) => {
    const events: AdmissionDecisionEvent[] = []
    const listener = (message: unknown): void => { events.push(message as AdmissionDecisionEvent) }
    subscribe(DECISION_CHANNEL, listener)
    t.teardown(() => { unsubscribe(DECISION_CHANNEL, listener) })
    const scene = kind.scene()
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(admission, scene.options)
    t.equal(await scene.refuse(app), kind.status, `refused with ${kind.status}`)
    const stats = app.admission.stats()
    t.equal(stats.reasons[kind.reason], 1, 'over the registration')
    t.equal(stats.routes[kind.route]!.reasons[kind.reason], 1, 'on its route')
    t.equal(Object.values(stats.reasons).reduce((a, b) => a + b, 0), 1, 'one refusal, one reason')
    const refused = events.filter((event) => event.outcome !== 'admitted')
    t.same(refused.map((event) => [event.route, event.reason, event.status]), [[kind.route, kind.reason, kind.status]])
  })
}

/** A route's reasons by name, sorted (as stats() lists them), all at `count`. */
const at = (count: number, ...reasons: string[]): Record<string, number> => Object.fromEntries(reasons.sort().map((reason) => [reason, count]))

t.test('every reason a route\'s plan can refuse for is there from the start, at 0; none it cannot', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, {
    maxInFlight: 10,
    maxLongLived: 5,
    clientInFlight: 2,
    pressure: { maxEventLoopDelay: 1000, maxHeapUsedBytes: 1e12 },
    queueDelay: true
  })
  app.setNotFoundHandler({ preHandler: app.admission.notFound }, async (_request, reply) => reply.code(404).send('none'))
  app.get('/plain', async () => 'ok')
  app.get('/own', { config: { admission: { maxInFlight: 3, clientInFlight: false } } }, async () => 'ok')
  app.get('/shadow', { config: { admission: { enforce: false } } }, async () => 'ok')
  app.get('/allow', { config: { admission: { onBackendError: 'allow', clientInFlight: false } } }, async () => 'ok')
  app.get('/free', { config: { admission: { rateLimit: false, clientInFlight: false } } }, async () => 'ok')
  app.get('/stream', { config: { admission: { longLived: true, maxLongLived: 1, rateLimit: false, clientInFlight: false } } }, async () => 'ok')
  app.post('/login', { config: { admission: { rateLimit: { limit: 5, windowMs: 60_000 }, count: 'failures', clientInFlight: false } } }, async () => 'ok')
  app.get('/tiers', { config: { admission: { rateLimit: { tiers: { free: { limit: 5, windowMs: 1000 }, pro: [{ name: 'per-1s', limit: 50, windowMs: 1000 }, { name: 'daily', limit: 5000, windowMs: 86_400_000 }] }, tier: () => 'free' }, clientInFlight: false } } }, async () => 'ok')
  await app.ready()
  const shedding = ['pressure:eventLoopDelay', 'pressure:heapUsedBytes', 'queue-delay', 'in-flight', 'retry-reserve']
  const quota = ['quota:default', 'backend-unavailable']
  const { routes, reasons } = app.admission.stats()
  t.same(routes['GET /plain']!.reasons, at(0, ...shedding, 'client-in-flight', ...quota), 'pressure, queueing delay, the in-flight gate and its retry reserve, the client\'s slots, the quota and its backend')
  t.same(routes['GET /own']!.reasons, at(0, ...shedding, 'route-in-flight', 'route-retry-reserve', ...quota), 'the route\'s own in-flight limit and its retry reserve')
  t.same(routes['GET /shadow']!.reasons, at(0, 'pressure:eventLoopDelay', 'pressure:heapUsedBytes', 'queue-delay'), 'not enforcing: only pressure refuses')
  t.same(routes['GET /allow']!.reasons, at(0, ...shedding, 'quota:default'), 'onBackendError: \'allow\': a backend that cannot decide refuses nothing')
  t.same(routes['GET /free']!.reasons, at(0, ...shedding), 'no quota')
  t.same(routes['GET /stream']!.reasons, at(0, ...shedding, 'long-lived', 'route-long-lived'), 'a long-lived route: the registration\'s places and its own')
  t.same(routes['POST /login']!.reasons, at(0, ...shedding, 'login-failures', 'backend-unavailable'), 'login throttling: its quota\'s refusals are failed logins\'')
  t.same(routes['GET /tiers']!.reasons, at(0, ...shedding), 'a tiered route: what happens before a tier is picked')
  t.same(routes['GET /tiers (tier free)']!.reasons, at(0, 'quota:free', 'backend-unavailable'), 'each tier: its quota, by the tier\'s name')
  t.same(routes['GET /tiers (tier pro)']!.reasons, at(0, 'quota:pro-per-1s', 'quota:pro-daily', 'backend-unavailable'), 'a tier\'s stack: each policy by its name in RateLimit-Policy')
  t.same(routes['404']!.reasons, at(0, ...shedding, ...quota), 'requests that matched no route: refused while the gate is full, on the shared quota')
  t.same(reasons, at(0, ...shedding, 'client-in-flight', 'route-in-flight', 'route-retry-reserve', 'long-lived', 'route-long-lived', 'login-failures', ...quota, 'quota:free', 'quota:pro-per-1s', 'quota:pro-daily'), 'over the registration: every route\'s')
})

t.test('a fleet\'s in-flight gate is full by its share; with the adaptive limit, by either', async (t) => {
  for (const [maxInFlight, expected] of [[{ fleet: 4 }, ['fleet-in-flight']], [{ fleet: 4, adaptive: true }, ['fleet-in-flight', 'in-flight']]] as const) {
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(admission, { backend: fleetOfTwo(), rateLimit: false, retries: false, maxInFlight })
    app.get('/', async () => 'ok')
    app.get('/own', { config: { admission: { maxInFlight: 1 } } }, async () => 'ok')
    await app.ready()
    const { routes } = app.admission.stats()
    t.same(routes['GET /']!.reasons, at(0, ...expected), JSON.stringify(maxInFlight))
    t.same(routes['GET /own']!.reasons, at(0, ...expected, 'route-in-flight'), 'retries off: no retry reserve')
  }
})

t.test('a stack names the policy that had no room, whether it decides now or by promise', async (t) => {
  for (const backend of [undefined, byPromise(Date.now)]) {
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(admission, { backend, rateLimit: [{ name: 'per-minute', limit: 100, windowMs: 60_000 }, { name: 'per-second', limit: 1, windowMs: 1000 }] })
    app.get('/', async () => 'ok')
    const statuses = [(await app.inject('/')).statusCode, (await app.inject('/')).statusCode]
    t.same(statuses, [200, 429])
    t.same(app.admission.stats().routes['GET /']!.reasons, { 'backend-unavailable': 0, 'quota:per-minute': 0, 'quota:per-second': 1 }, backend === undefined ? 'memory' : 'by promise')
  }
})

t.test('a client\'s in-flight slots kept for a fleet may fail to answer: backend-unavailable, unless the route admits then', async (t) => {
  const memory = memoryBackend()
  const backend: RatesBackend = {
    kind: 'client-slots',
    limiter: (address, policy) => memory.limiter(address, policy),
    stop: () => memory.stop(),
    clientSlots: () => ({ take: async () => true, release: () => {}, stop: async () => {} })
  }
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend, rateLimit: false, clientInFlight: 1 })
  app.get('/deny', async () => 'ok')
  app.get('/allow', { config: { admission: { onBackendError: 'allow' } } }, async () => 'ok')
  await app.ready()
  const { routes } = app.admission.stats()
  t.same(routes['GET /deny']!.reasons, at(0, 'client-in-flight', 'backend-unavailable'))
  t.same(routes['GET /allow']!.reasons, at(0, 'client-in-flight'))
})
