// A custom backend's stack, deciding by promise as a remote one does: the gate's async path for
// stacks and login throttling, a failure record that throws, rejects or succeeds, metrics timing
// a stack's round trips, and a backend without stack().
import t from 'tap'
import Fastify from 'fastify'
import { Registry } from 'prom-client'
import admission, { AdmissionOptionError, memoryBackend, type RatesBackend, type StackLimiter } from '../../lib/index.js'
import { manualClock } from './limits-backends.js'

type Mode = 'ok' | 'throw' | 'reject'

/** A backend whose stacks decide by promise (over memory's), and whose `consume` fails as `mode` says. */
function asyncBackend (mode: { consume: Mode }): RatesBackend {
  const inner = memoryBackend({ clock: manualClock().now })
  return {
    kind: 'async-custom',
    limiter: (address, policy) => inner.limiter(address, policy),
    stop: async () => { await inner.stop() },
    stack: (address, policies): StackLimiter => {
      const stack = inner.stack(address, policies)
      return {
        policies,
        consume: (identity, cost) => {
          if (mode.consume === 'throw') throw new Error('sync boom')
          if (mode.consume === 'reject') return Promise.reject(new Error('async boom'))
          return stack.consume(identity, cost)
        },
        check: (identity, cost) => stack.check(identity, cost),
        state: (identity) => stack.state(identity),
        delete: (identity) => stack.delete(identity)
      }
    }
  }
}

t.test('a stack deciding by promise: the headers come from the decision', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend: asyncBackend({ consume: 'ok' }), rateLimit: [{ algorithm: 'fixed-window', limit: 1, windowMs: 1000 }, { algorithm: 'fixed-window', limit: 5, windowMs: 60_000, name: 'minute' }] })
  app.get('/', async () => 'ok')
  const first = await app.inject('/')
  t.equal(first.statusCode, 200)
  t.match(first.headers.ratelimit, /^"per-1s";r=0;t=\d+, "minute";r=4;t=\d+$/)
  const second = await app.inject('/')
  t.equal(second.statusCode, 429)
  t.match(second.headers.ratelimit, /^"per-1s";r=0;t=\d+, "minute";r=4;t=\d+$/, 'the minute unconsumed')
})

t.test('login throttling: a failure the backend throws on, rejects or records', async (t) => {
  const lines: Array<{ msg: string }> = []
  const mode: { consume: Mode } = { consume: 'throw' }
  const app = Fastify({ logger: { level: 'error', stream: { write: (line: string) => { lines.push(JSON.parse(line) as { msg: string }) } } } })
  t.teardown(() => app.close())
  await app.register(admission, { backend: asyncBackend(mode), rateLimit: false })
  app.post('/login', { config: { admission: { rateLimit: { algorithm: 'fixed-window', limit: 2, windowMs: 60_000 }, count: 'failures' } } }, async (_request, reply) => reply.code(401).send('no'))
  const attempt = async (): Promise<number> => (await app.inject({ method: 'POST', url: '/login' })).statusCode
  const settle = async (): Promise<void> => { await new Promise((resolve) => setTimeout(resolve, 10)) }
  t.equal(await attempt(), 401)
  t.equal(await attempt(), 401)
  t.equal(lines.length, 1, 'logged once while it fails')
  t.match(lines[0]!.msg, /was not counted \(the backend threw\)/)
  mode.consume = 'ok'
  t.equal(await attempt(), 401)
  await settle()
  mode.consume = 'reject'
  t.equal(await attempt(), 401)
  await settle()
  t.equal(lines.length, 2, 'logged again after a failure was counted')
  t.match(lines[1]!.msg, /was not counted \(the backend could not record it\)/)
  mode.consume = 'ok'
  t.equal(await attempt(), 401)
  await settle()
  t.equal(await attempt(), 429, 'two failures recorded')
})

t.test('metrics time a stack\'s round trips (decisions and checks); a synchronous stack is not timed', async (t) => {
  const registry = new Registry()
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend: asyncBackend({ consume: 'ok' }), rateLimit: [{ limit: 5, windowMs: 1000 }, { limit: 50, windowMs: 60_000 }], metrics: { registry } })
  app.get('/', async () => 'ok')
  app.post('/login', { config: { admission: { rateLimit: { limit: 5, windowMs: 1000 }, count: 'failures' } } }, async () => 'ok')
  await app.inject('/')
  await app.inject({ method: 'POST', url: '/login' })
  const histogram = (await registry.getMetricsAsJSON()).find((m) => m.name.endsWith('backend_decision_duration_seconds'))
  const count = histogram?.values.find((v) => (v as { metricName?: string }).metricName?.endsWith('_count'))
  t.equal(count?.value, 2, 'one decision and one check')

  const sync = new Registry()
  const memory = Fastify()
  t.teardown(() => memory.close())
  await memory.register(admission, { rateLimit: [{ limit: 5, windowMs: 1000 }, { limit: 50, windowMs: 60_000 }], metrics: { registry: sync } })
  memory.get('/', async () => 'ok')
  t.equal((await memory.inject('/')).statusCode, 200)
  const none = (await sync.getMetricsAsJSON()).find((m) => m.name.endsWith('backend_decision_duration_seconds'))
  t.equal(none?.values.find((v) => (v as { metricName?: string }).metricName?.endsWith('_count'))?.value ?? 0, 0, 'nothing observed')
})

t.test('a backend without stack(): a stack, and count: \'failures\', are refused at registration, also with metrics', async (t) => {
  const inner = memoryBackend()
  const plain: RatesBackend = { kind: 'plain', limiter: (address, policy) => inner.limiter(address, policy), stop: async () => {} }
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend: plain, rateLimit: false, metrics: { registry: new Registry() } })
  app.post('/login', { config: { admission: { rateLimit: { limit: 5, windowMs: 1000 }, count: 'failures' } } }, async () => 'ok')
  await t.rejects(async () => { await app.ready() }, {
    constructor: AdmissionOptionError,
    path: 'config.admission of POST /login.count',
    message: /to be 'requests': the backend \(kind "plain"\) has no stack\(\), which count: 'failures' needs/
  })
})

t.test('login throttling on a stack deciding by promise: more attempts in flight than the quota holds are refused', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend: asyncBackend({ consume: 'ok' }), rateLimit: false })
  let open!: () => void
  const gate = new Promise<void>((resolve) => { open = resolve })
  let entered = 0
  app.post('/login', { config: { admission: { rateLimit: { algorithm: 'fixed-window', limit: 1, windowMs: 60_000 }, count: 'failures' } } }, async (_request, reply) => {
    entered++
    await gate
    return reply.code(401).send('no')
  })
  const first = app.inject({ method: 'POST', url: '/login' })
  while (entered < 1) await new Promise((resolve) => setImmediate(resolve))
  const second = await app.inject({ method: 'POST', url: '/login' })
  t.equal(second.statusCode, 429)
  t.equal(second.headers['retry-after'], '1', 'until the attempt in flight ends')
  open()
  t.equal((await first).statusCode, 401)
})
