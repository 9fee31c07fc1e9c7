import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import admission from '../../lib/index.js'
import type { AdmissionOptions } from '../../lib/gate/options/options.js'
import { deferred, eventually } from '../helpers/http.js'

// Priorities at the global gate, with requests held in their handlers (no timing): L = 10,
// maxInFlight.criticalReserve 0.2, so R = 2 and sheddable routes stop at L - R = 8.
async function prioritized (t: Test, options: AdmissionOptions = { maxInFlight: { limit: 10, criticalReserve: 0.2 } }): Promise<{ app: FastifyInstance, send: (url: string) => Promise<number>, release: () => void }> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: false, ...options })
  let hold = deferred()
  const handler = async (): Promise<string> => { await hold.promise; return 'ok' }
  app.get('/normal', handler)
  app.get('/critical', { config: { admission: { priority: 'critical' } } }, handler)
  app.get('/sheddable', { config: { admission: { priority: 'sheddable' } } }, handler)
  app.get('/critical-one', { config: { admission: { priority: 'critical', maxInFlight: 1 } } }, handler)
  app.get('/sheddable-one', { config: { admission: { priority: 'sheddable', maxInFlight: 1 } } }, handler)
  const pending: Array<Promise<unknown>> = []
  /** Sends a request; resolves with its status once it is answered (503) or admitted and held (0). */
  const send = async (url: string): Promise<number> => {
    const before = app.admission.stats()
    let status = 0
    const answer = app.inject(url).then((r) => { status = r.statusCode })
    pending.push(answer)
    await eventually(() => status !== 0 || app.admission.stats().inFlight > before.inFlight)
    return status
  }
  const release = (): void => { hold.resolve(); hold = deferred() }
  t.teardown(async () => { release(); await Promise.all(pending) })
  return { app, send, release }
}

t.test('under pressure the lowest goes first; critical keeps its reserve beyond the limit', async (t) => {
  const { app, send, release } = await prioritized(t)
  for (let i = 0; i < 8; i++) t.equal(await send('/sheddable'), 0, `sheddable ${i + 1} admitted`)
  t.equal(await send('/sheddable'), 503, 'the 9th sheddable: the last R slots are not its')
  t.equal(await send('/normal'), 0)
  t.equal(await send('/normal'), 0, 'normal fills the limit')
  t.equal(await send('/normal'), 503, 'normal at the limit')
  t.equal(await send('/critical'), 0)
  t.equal(await send('/critical'), 0, 'critical: its reserve of 2 beyond the limit')
  t.equal(await send('/critical'), 503, 'a third critical at the limit')
  t.match(app.admission.stats(), { inFlight: 12, shed: 3, limit: 10 })
  release()
  t.ok(await eventually(() => app.admission.stats().inFlight === 0), 'every slot back, the critical count too')
  // After the release the critical count is 0 again: at the limit, two critical fit beyond it.
  for (let i = 0; i < 10; i++) t.equal(await send('/normal'), 0)
  t.equal(await send('/critical'), 0)
  t.equal(await send('/critical'), 0)
  t.equal(await send('/critical'), 503)
})

t.test('spare capacity is borrowed: critical alone fills the limit, and normal the reserve', async (t) => {
  const { app, send, release } = await prioritized(t)
  for (let i = 0; i < 10; i++) t.equal(await send('/critical'), 0)
  t.equal(await send('/critical'), 503, 'beyond the limit only while fewer than R critical are in flight')
  t.equal(await send('/normal'), 503)
  release()
  t.ok(await eventually(() => app.admission.stats().inFlight === 0))
  for (let i = 0; i < 10; i++) t.equal(await send('/normal'), 0, 'normal uses the whole limit, the reserve included')
  t.equal(await send('/normal'), 503)
})

t.test("a route's own semaphore after the global slot gives the global slot back", async (t) => {
  const { app, send } = await prioritized(t)
  t.equal(await send('/critical-one'), 0)
  t.equal(await send('/critical-one'), 503, 'the route is full')
  t.equal(await send('/sheddable-one'), 0)
  t.equal(await send('/sheddable-one'), 503)
  t.equal(app.admission.stats().inFlight, 2, 'the refused ones hold nothing')
  for (let i = 0; i < 8; i++) t.equal(await send('/normal'), 0)
  t.equal(await send('/critical'), 0, 'the refused critical left the critical count at 1: one more fits beyond the limit')
  t.equal(await send('/critical'), 503)
})

t.test('criticalReserve 0: critical is normal, sheddable too', async (t) => {
  const { send } = await prioritized(t, { maxInFlight: { limit: 2, criticalReserve: 0 } })
  t.equal(await send('/sheddable'), 0)
  t.equal(await send('/sheddable'), 0)
  t.equal(await send('/critical'), 503)
})

t.test('with the adaptive limit: the reserve is a share of the current limit', async (t) => {
  const { app, send } = await prioritized(t, { maxInFlight: { adaptive: true, min: 4, max: 4, criticalReserve: 0.5 } })
  t.equal(app.admission.limit, 4)
  t.equal(await send('/sheddable'), 0)
  t.equal(await send('/sheddable'), 0)
  t.equal(await send('/sheddable'), 503, 'L - R = 2')
  t.equal(await send('/normal'), 0)
  t.equal(await send('/normal'), 0)
  t.equal(await send('/critical'), 0)
  t.equal(await send('/critical'), 0)
  t.equal(await send('/critical'), 503)
})

t.test('the default reserve is a fifth of the limit', async (t) => {
  const { send } = await prioritized(t, { maxInFlight: 20 })
  for (let i = 0; i < 16; i++) t.equal(await send('/sheddable'), 0)
  t.equal(await send('/sheddable'), 503)
})

t.test('a prioritized route with a quota: shed, then limit, as any route', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { maxInFlight: 4, rateLimit: { limit: 1, windowMs: 60_000 } })
  app.get('/', { config: { admission: { priority: 'critical' } } }, async () => 'ok')
  t.equal((await app.inject('/')).statusCode, 200)
  t.equal((await app.inject('/')).statusCode, 429)
  t.match(app.admission.stats(), { admitted: 1, limited: 1, inFlight: 0 })
})

t.test('a prioritized route keeps its priority with the rate check in preHandler and in shadow mode', async (t) => {
  for (const extra of [{ hook: 'preHandler' as const }, { enforce: false }]) {
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(admission, { maxInFlight: { limit: 2, criticalReserve: 0.5 }, rateLimit: { limit: 100, windowMs: 60_000 } })
    let hold = deferred()
    app.get('/normal', async () => { await hold.promise; return 'ok' })
    app.get('/sheddable', { config: { admission: { priority: 'sheddable', ...extra } } }, async () => 'ok')
    app.get('/critical', { config: { admission: { priority: 'critical', ...extra } } }, async () => 'ok')
    t.equal((await app.inject('/sheddable')).statusCode, 200, `${JSON.stringify(extra)}: an idle gate admits sheddable`)
    const held = app.inject('/normal')
    await eventually(() => app.admission.stats().inFlight === 1)
    // L = 2, R = 1: with one request in flight a sheddable one meets its limit (L − R = 1).
    const sheddable = await app.inject('/sheddable')
    if (extra.enforce === false) {
      t.equal(sheddable.statusCode, 200, 'shadow mode: it would have been shed, and goes on')
      t.equal(app.admission.stats().wouldShed, 1)
    } else {
      t.equal(sheddable.statusCode, 503, 'preHandler: shed in onRequest by its priority')
    }
    t.equal((await app.inject('/critical')).statusCode, 200, 'critical still has room')
    hold.resolve()
    hold = deferred()
    t.equal((await held).statusCode, 200)
  }
})

t.test('with allowList.skipsShedding, a client not on the list still meets its route\'s priority', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, {
    maxInFlight: { limit: 2, criticalReserve: 0.5 },
    rateLimit: { limit: 100, windowMs: 60_000 },
    key: (request) => String(request.headers['x-client']),
    allowList: { clients: ['vip'], skipsShedding: true }
  })
  let hold = deferred()
  app.get('/normal', async () => { await hold.promise; return 'ok' })
  app.get('/sheddable', { config: { admission: { priority: 'sheddable' } } }, async () => 'ok')
  const held = app.inject({ url: '/normal', headers: { 'x-client': 'c0' } })
  await eventually(() => app.admission.stats().inFlight === 1)
  // L = 2, R = 1: one in flight is the sheddable limit (L − R), though a normal route has room.
  t.equal((await app.inject({ url: '/sheddable', headers: { 'x-client': 'c1' } })).statusCode, 503, 'shed by its priority')
  t.equal((await app.inject({ url: '/sheddable', headers: { 'x-client': 'vip' } })).statusCode, 200, 'the allowed client goes through')
  hold.resolve()
  hold = deferred()
  t.equal((await held).statusCode, 200)
})
