// Units a request gives back (its charge below its cost) belong to the window that admitted it:
// given back once its response ends in the next fixed window, they would be a gift to that window.
// Regression (issue 33, item 5): a cost-10 request whose charge returned 0 and whose response ended
// in the next window let 20 in that window of limit 10, on memory and on Redis; a stack holding a
// fixed window did the same. Clocks injected.
import t from 'tap'
import Fastify from 'fastify'
import { setImmediate as turn } from 'node:timers/promises'
import admission from '../../lib/index.js'
import { deferred } from '../helpers/http.js'
import { limitBackends } from './limits-backends.js'
import { testingRedisBackend } from '../../lib/backends/redis/redis-backend.js'
import { kernelServer } from '../backends/redis/kernel-client.js'

const WINDOW = 60_000
const T0 = 1_700_000_040_000 // a window starts here

// Memory, a real Redis (skipped without one), and the Redis backend on a server simulated on the
// kernels (no Redis needed: the backend's side of it is held without one too).
const kinds = [...await limitBackends(t), {
  name: 'redis (kernel server)',
  skip: false as const,
  make: (_t: unknown, clock: () => number) => testingRedisBackend({ client: kernelServer().client(), timeoutMs: 1000 }, { now: clock })
}]

const FIXED = { algorithm: 'fixed-window', limit: 10, windowMs: WINDOW } as const
// A stack: the fixed window, and a bucket that never binds (its give-backs are the window's to bound).
const STACKED = [{ ...FIXED, name: 'minute' }, { algorithm: 'token-bucket', limit: 1000, windowMs: 1000, name: 'burst' }] as const
const shapes = [{ name: 'a fixed window', rateLimit: FIXED, stack: false }, { name: 'a stack with a fixed window', rateLimit: STACKED, stack: true }]

for (const kind of kinds) for (const shape of shapes) {
  // The simulated server runs the single-key script only.
  const skip = shape.stack && kind.name === 'redis (kernel server)' ? 'the kernel server has no stack script' : kind.skip
  t.test(`${kind.name}, ${shape.name}: a give-back after its window is not taken; within it, it is`, { skip }, async (t) => {
    const clock = { now: T0 }
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(admission, { backend: kind.make(t, () => clock.now), key: (request) => String(request.headers['x-id'] ?? 'one'), rateLimit: shape.rateLimit as never })
    const holds: Array<{ promise: Promise<void>, resolve: (value: void) => void }> = []
    app.get('/slow', { config: { admission: { cost: 10, charge: () => 0 } } }, async () => {
      const hold = deferred()
      holds.push(hold)
      await hold.promise
      return 'read slowly'
    })
    app.get('/', { config: { admission: { cost: 10, charge: () => 0 } } }, async () => 'quick')
    app.get('/plain', { config: { admission: { cost: 10 } } }, async () => 'takes its 10')
    await app.ready()

    // The quota's clock is known from its first answer (on Redis, the server's time in a reply):
    // before it, a fixed window's units are not given back (the window that admitted them is not
    // known). Another client's request makes that first answer.
    t.equal((await app.inject({ url: '/plain', headers: { 'x-id': 'another' } })).statusCode, 200)
    // Within its window: the 10 units come back, and 10 more are admitted in it.
    t.equal((await app.inject('/')).statusCode, 200)
    await turn()
    t.equal((await app.inject('/')).statusCode, 200, 'the units given back in their own window')
    await turn()

    // The last 10 of the window, taken by a request whose response ends in the next window.
    clock.now = T0 + 2 * WINDOW - 1
    const slow = app.inject('/slow')
    await new Promise((resolve) => { const wait = (): void => { if (holds.length === 1) resolve(undefined); else setImmediate(wait) }; wait() })
    clock.now = T0 + 2 * WINDOW
    t.equal((await app.inject('/plain')).statusCode, 200, 'the next window: its own 10')
    holds[0]!.resolve()
    t.equal((await slow).statusCode, 200)
    await turn()
    await turn()
    t.equal((await app.inject('/plain')).statusCode, 429, 'the units of the window that ended are not given to this one')
  })
}

t.test('before the quota\'s first answer its clock is not known: a fixed window\'s units are not given back', async (t) => {
  const clock = { now: T0 }
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend: testingRedisBackend({ client: kernelServer().client(), timeoutMs: 1000 }, { now: () => clock.now }), key: () => 'one', rateLimit: { algorithm: 'fixed-window', limit: 10, windowMs: WINDOW } })
  app.get('/', { config: { admission: { cost: 10, charge: () => 0 } } }, async () => 'first')
  await app.ready()
  t.equal((await app.inject('/')).statusCode, 200)
  await turn()
  t.equal((await app.inject('/')).statusCode, 429, 'kept: the safe side (never a gift)')
})
