// How a registration puts its plans on routes it did not see declared: routes another registration
// saw (planned up front, their options checked at ready), routes opted out, routes declared before
// any registration that ask for a hook only a route of its own can have, and routes no
// registration encloses. Through inject and real sockets; each case names what a user sees.
import t from 'tap'
import Fastify from 'fastify'
import admission, { memoryBackend, type RatesBackend, type StackLimiter } from '../../lib/index.js'
import type { AdmissionDecorator } from '../../lib/gate/decorator.js'
import { manualClock } from './limits-backends.js'
import { scriptedReadings } from '../helpers/pressure.js'
import { deferred, eventually, listen } from '../helpers/http.js'
import { rawSocket, statuses } from '../helpers/raw.js'

const limit = (n: number) => ({ rateLimit: { limit: n, windowMs: 60_000 } })

t.test('a route another registration saw, inside a registration that found earlier routes: gated by both, its options checked at ready', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  // Declared before any registration: the router holds a route no registration saw.
  app.get('/early', async () => 'early')
  await app.register(admission, limit(3))
  let inner!: AdmissionDecorator
  await app.register(async (child) => {
    // Seen by the outer registration as it is declared, before the inner one exists.
    child.get('/x', { config: { admission: limit(1) } }, async () => 'x')
    child.get('/free', { config: { admission: false } }, async () => 'free')
    await child.register(admission, limit(5))
    inner = child.admission
  })
  await app.ready()
  t.same([(await app.inject('/x')).statusCode, (await app.inject('/x')).statusCode], [200, 429], 'the route\'s own limit (the outer, then the inner, each its own quota of 1)')
  t.match(inner.stats().routes['GET /x'], { admitted: 1 }, 'the inner registration gated it too')
  t.same([(await app.inject('/free')).statusCode, (await app.inject('/free')).statusCode], [200, 200], 'opted out in both')
  t.equal(inner.stats().routes['GET /free'], undefined)
  t.equal((await app.inject('/early')).statusCode, 200)

  const bad = Fastify()
  t.teardown(() => bad.close())
  bad.get('/early', async () => 'early')
  await bad.register(admission, limit(3))
  await bad.register(async (child) => {
    child.get('/bad', { config: { admission: { maxInFlight: -1 } } }, async () => 'x')
    await child.register(admission, limit(5))
  })
  await t.rejects(async () => { await bad.ready() }, { code: 'ADMISSION_INVALID_OPTION' }, 'a bad option on such a route fails at ready()')
})

t.test('routes declared after a registration that found earlier ones: opted out, or with a preHandler check', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  app.get('/early', async () => 'early')
  await app.register(admission, limit(1))
  app.get('/free', { config: { admission: false } }, async () => 'free')
  app.get('/checked', { config: { admission: { hook: 'preHandler' } } }, async () => 'checked')
  await app.ready()
  t.same([(await app.inject('/free')).statusCode, (await app.inject('/free')).statusCode], [200, 200], 'opted out: never limited')
  t.same([(await app.inject('/checked')).statusCode, (await app.inject('/checked')).statusCode], [200, 429], 'the check in preHandler')
  t.equal(app.admission.stats().routes['GET /free'], undefined)
})

t.test('routes declared before the plugin (same tick, no await) with login throttling and the check in preHandler', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  app.register(admission, limit(100))
  app.post('/login', { config: { admission: { count: 'failures', rateLimit: { limit: 2, windowMs: 60_000 } } } }, async (request, reply) => {
    if ((request.body as { password?: string }).password !== 'right') reply.code(401)
    return 'answered'
  })
  app.get('/after-auth', {
    preHandler: async () => {},
    config: { admission: { hook: 'preHandler', rateLimit: { limit: 1, windowMs: 60_000 } } }
  }, async () => 'ok')
  await app.ready()
  const login = async (password: string): Promise<number> => (await app.inject({ method: 'POST', url: '/login', payload: { password } })).statusCode
  t.same([await login('right'), await login('right'), await login('right')], [200, 200, 200], 'successes take nothing')
  t.same([await login('wrong'), await login('wrong'), await login('right')], [401, 401, 429], 'two failures use the quota up')
  t.same([(await app.inject('/after-auth')).statusCode, (await app.inject('/after-auth')).statusCode], [200, 429], 'the check in preHandler')
})

t.test('one route asking for a gate outside every registration: ready() names it', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(async (a) => { await a.register(admission, limit(5)) })
  app.register(async (b) => { b.post('/b/x', { config: { admission: limit(1) } }, async () => 'x') })
  await t.rejects(async () => { await app.ready() }, { code: 'ADMISSION_UNGATED_ROUTE', message: /^POST \/b\/x has config\.admission, but no registration of fastify-admission encloses it/ })
})

t.test('pipelined: a request refused by its quota while the one before it still runs gives its permit back at once', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { maxInFlight: 4, rateLimit: false })
  const hold = deferred()
  const entered = deferred()
  app.get('/slow', async () => { entered.resolve(); await hold.promise; return 'slow' })
  app.get('/once', { config: { admission: limit(1) } }, async () => 'once')
  const port = await listen(app)
  const { socket, received } = await rawSocket(port)
  t.teardown(() => socket.destroy())
  // The first /once takes its client's one request; the second, pipelined behind /slow, is refused.
  socket.write('GET /once HTTP/1.1\r\nHost: x\r\n\r\nGET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /once HTTP/1.1\r\nHost: x\r\n\r\n')
  await entered.promise
  t.ok(await eventually(() => app.admission.stats().routes['GET /once']!.limited === 1), 'the third request was refused')
  t.ok(await eventually(() => app.admission.stats().inFlight === 1), 'only /slow holds a permit')
  t.equal(app.admission.stats().routes['GET /once']!.inFlight, 0)
  hold.resolve()
  t.ok(await eventually(() => statuses(received()).length === 3))
  t.same(statuses(received()), [200, 200, 429])
  t.ok(await eventually(() => app.admission.stats().inFlight === 0))
})

t.test('headers: false leaves the fields out on every kind of quota: a stack, a quota deciding by promise, a stack deciding by promise', async (t) => {
  // A backend whose limiters and stacks answer by promise, over memory's.
  const remote = (inner = memoryBackend({ clock: manualClock().now })): RatesBackend => ({
    kind: 'async-custom',
    limiter: (address, policy) => {
      const limiter = inner.limiter(address, policy)
      return { policy, consume: (identity, cost) => limiter.consume(identity, cost), state: (identity) => limiter.state(identity), delete: (identity) => limiter.delete(identity) }
    },
    stop: async () => { await inner.stop() },
    stack: (address, policies): StackLimiter => {
      const stack = inner.stack(address, policies)
      return { policies, consume: (identity, cost) => stack.consume(identity, cost), check: (identity, cost) => stack.check(identity, cost), state: (identity) => stack.state(identity), delete: (identity) => stack.delete(identity) }
    }
  })
  const pair = [{ limit: 1, windowMs: 60_000 }, { limit: 5, windowMs: 86_400_000, name: 'daily' }]
  for (const [name, backend, rateLimit] of [['memory stack', undefined, pair], ['promise', remote(), limit(1).rateLimit], ['promise stack', remote(), pair]] as const) {
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(admission, { headers: false, rateLimit: rateLimit as never, ...(backend === undefined ? {} : { backend }) })
    app.get('/', async () => 'ok')
    const first = await app.inject('/')
    const second = await app.inject('/')
    t.same([first.statusCode, second.statusCode], [200, 429], name)
    t.equal(first.headers.ratelimit, undefined, `${name}: no RateLimit`)
    t.equal(second.headers['ratelimit-policy'], undefined, `${name}: no RateLimit-Policy on the refusal either`)
    t.equal(second.headers['retry-after'], '60')
  }
})

t.test('a HEAD request to a GET route declared before the plugin shares the GET\'s quota', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  app.get('/page', { config: { admission: limit(2) } }, async () => 'page')
  app.register(admission, limit(100))
  await app.ready()
  t.same([(await app.inject('/page')).statusCode, (await app.inject({ method: 'HEAD', url: '/page' })).statusCode, (await app.inject('/page')).statusCode], [200, 200, 429])
  t.match(app.admission.stats().routes['GET /page'], { admitted: 2, limited: 1 })
})

t.test('a pressureHandler that answers, then rejects: the request is answered once, and its permit ends once', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  const readings = scriptedReadings({ heapUsedBytes: 100 })
  await app.register(admission, {
    maxInFlight: 2,
    rateLimit: false,
    pressure: {
      maxHeapUsedBytes: 10,
      sampleInterval: 10,
      readings: readings.read,
      pressureHandler: async (_request, reply) => {
        await reply.code(503).send('busy')
        throw new Error('after the answer')
      }
    }
  })
  app.get('/', async () => 'ok')
  await app.ready()
  t.ok(await eventually(() => app.admission.pressure()?.underPressure === true))
  const answer = await app.inject('/')
  t.equal(answer.statusCode, 503)
  t.equal(answer.body, 'busy')
  t.equal(app.admission.stats().inFlight, 0)
  readings.set({ heapUsedBytes: 1 })
  t.ok(await eventually(() => app.admission.pressure()?.underPressure === false))
  t.same([(await app.inject('/')).statusCode, (await app.inject('/')).statusCode], [200, 200], 'both slots free')
})

t.test('two registrations gating through their contexts\' hooks: the outer decides first, and its error stops the inner', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  let inner!: AdmissionDecorator
  // The child (its route declared before its own registration) is loaded before the root's.
  void app.register(async (child) => {
    child.get('/r', async () => 'ok')
    await child.register(admission, limit(5))
    inner = child.admission
  })
  void app.register(admission, {
    ...limit(5),
    key: (request) => {
      if (request.headers['x-bad'] !== undefined) throw new Error('no key for this request')
      return 'k'
    }
  })
  await app.ready()
  const failed = await app.inject({ url: '/r', headers: { 'x-bad': '1' } })
  t.equal(failed.statusCode, 500, 'the outer registration\'s key threw: Fastify answers 500')
  t.equal(inner.stats().admitted, 0, 'the inner registration never decided on it')
  t.equal((await app.inject('/r')).statusCode, 200)
  t.match(app.admission.stats(), { admitted: 1 })
  t.match(inner.stats(), { admitted: 1, inFlight: 0 })
})
