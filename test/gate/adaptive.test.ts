import t, { type Test } from 'tap'
import { mock } from 'node:test'
import Fastify, { type FastifyInstance } from 'fastify'
import admission, { memoryBackend } from '../../lib/index.js'
import { AdaptiveSampler } from '../../lib/gate/release/adaptive-sampler.js'
import type { AdmissionOptions } from '../../lib/gate/options/options.js'
import { deferred, eventually, getThenAbort, listen } from '../helpers/http.js'

// The adaptive limit through the plugin. Time is a fake `performance.now`: Fastify reads it when a
// request starts and when its response finishes (`reply.elapsedTime`, the sample's latency), and
// the gate reads it for the sample's completion time; a handler "takes" `ms` by moving it. No
// assertion depends on how fast the machine is.
let now = 1_000_000
const realNow = performance.now.bind(performance)
performance.now = () => now
t.teardown(() => { performance.now = realNow })

/** Every latency the controller's glue was given, in order. */
const samples: number[] = []
const sample = AdaptiveSampler.prototype.sample
AdaptiveSampler.prototype.sample = function (this: AdaptiveSampler, rtt: number) {
  samples.push(rtt)
  sample.call(this, rtt)
}

async function app (t: Test, options: AdmissionOptions, serverOptions = {}): Promise<FastifyInstance> {
  const app = Fastify(serverOptions)
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: false, ...options })
  samples.length = 0
  return app
}

/** A route whose handler takes `ms()` of fake time. */
function timed (app: FastifyInstance, url: string, ms: () => number, config: object = {}): void {
  app.get(url, { config }, async () => { now += ms(); return 'ok' })
}

t.test('no configuration: starts at 20, shown in stats() and app.admission.limit', async (t) => {
  const a = await app(t, { maxInFlight: { adaptive: true } })
  timed(a, '/', () => 10)
  t.equal(a.admission.stats().limit, 20)
  t.equal(a.admission.limit, 20)
  t.equal((await a.inject('/')).statusCode, 200)
  t.strictSame(samples, [10], 'the latency of the request, as Fastify measured it')
})

/**
 * One round: as many requests as the limit admits start together and all take `ms` (the clock
 * moves while they wait), then complete: one window of samples at full utilization.
 */
async function round (t: Test, a: FastifyInstance, release: { hold: { promise: Promise<void>, resolve: () => void } }, ms: number, url = '/', wait = eventually): Promise<void> {
  const k = a.admission.limit as number
  release.hold = deferred()
  const answers = Array.from({ length: k }, async () => await a.inject(url))
  t.ok(await wait(() => a.admission.stats().inFlight === k), `${k} in flight`)
  now += ms
  release.hold.resolve()
  for (const answer of answers) t.equal((await answer).statusCode, 200)
}

t.test('the limit rises with fast responses and falls when latency climbs', async (t) => {
  const a = await app(t, { maxInFlight: { adaptive: true, initial: 4, probeIntervalMs: 1e9 } })
  const release = { hold: deferred() }
  a.get('/', async () => { await release.hold.promise; return 'ok' })
  for (let i = 0; i < 12; i++) await round(t, a, release, 10)
  const risen = a.admission.limit as number
  t.ok(risen > 4, `risen from 4 to ${risen} at a steady 10 ms`)
  t.equal(a.admission.stats().limit, risen)
  for (let i = 0; i < 12; i++) await round(t, a, release, 100)
  const fallen = a.admission.limit as number
  t.ok(fallen < risen, `fallen from ${risen} to ${fallen} at 100 ms`)
})

t.test('one client at a time says nothing about a higher limit (app-limited): no growth', async (t) => {
  const a = await app(t, { maxInFlight: { adaptive: true, initial: 4 } })
  timed(a, '/', () => 10)
  for (let i = 0; i < 60; i++) await a.inject('/')
  t.equal(a.admission.limit, 4)
  t.equal(samples.length, 60)
})

t.test('what is not a sample: refusals, 5xx, aborts, handler timeouts, opted-out routes, 404s', async (t) => {
  const a = await app(t, { maxInFlight: { adaptive: true, min: 1, max: 1, initial: 1 }, rateLimit: { limit: 1, windowMs: 60_000 } }, { handlerTimeout: 1000 })
  const hold = deferred()
  const entered = deferred()
  let heldSocket: { destroyed: boolean } | undefined
  a.get('/held', { config: { admission: { rateLimit: false } } }, async (request) => { heldSocket = request.raw.socket; entered.resolve(); await hold.promise; return 'held' })
  a.get('/quota', async () => 'ok')
  a.get('/throws', { config: { admission: { rateLimit: false } } }, async () => { now += 5; throw new Error('boom') })
  a.get('/out', { config: { admission: false } }, async () => { now += 5; return 'out' })
  a.get('/later', { config: { admission: { rateLimit: false } }, preHandler: async (_request, reply) => reply.code(401).send('no') }, async () => 'never')
  t.equal((await a.inject('/quota')).statusCode, 200)
  t.equal(samples.length, 1, 'an admitted 200 is one')
  t.equal((await a.inject('/quota')).statusCode, 429, 'refused by the quota')
  t.equal((await a.inject('/throws')).statusCode, 500)
  t.equal((await a.inject('/out')).statusCode, 200)
  t.equal((await a.inject('/missing')).statusCode, 404)
  t.equal(samples.length, 1, 'none of these')
  t.equal((await a.inject('/later')).statusCode, 401)
  t.equal(samples.length, 2, 'a response written by a later hook is (the work was done)')
  const port = await listen(a)
  const shedWhileHeld = (async () => {
    await entered.promise
    return await a.inject('/quota')
  })()
  const aborted = getThenAbort(port, '/held', entered.promise)
  t.equal((await shedWhileHeld).statusCode, 503, 'shed while the one slot is held')
  await aborted
  t.ok(await eventually(() => heldSocket?.destroyed === true), 'the server saw the client go')
  hold.resolve()
  t.ok(await eventually(() => a.admission.stats().inFlight === 0), 'the aborted request gave its slot back')
  t.strictSame(samples, [0, 0], 'an abort and a shed request are not samples')
})

t.test('a handler timeout is not a sample', async (t) => {
  const a = await app(t, { maxInFlight: { adaptive: true } }, { handlerTimeout: 20 })
  const hold = deferred()
  a.get('/slow', async () => { await hold.promise; return 'late' })
  const answer = await a.inject('/slow')
  t.equal(answer.statusCode, 503, "Fastify's handler timeout")
  hold.resolve()
  t.ok(await eventually(() => a.admission.stats().inFlight === 0))
  t.equal(samples.length, 0)
})

t.test("a 503's Retry-After is the measured latency in whole seconds, rounded up, at least 1", async (t) => {
  const a = await app(t, { maxInFlight: { adaptive: true, min: 1, max: 1, initial: 1 } })
  const hold = deferred()
  const entered = deferred()
  let ms = 2_500
  a.get('/', async () => { now += ms; return 'ok' })
  a.get('/held', async () => { entered.resolve(); await hold.promise; now += ms; return 'held' })
  const later = deferred()
  const enteredAgain = deferred()
  a.get('/held2', async () => { enteredAgain.resolve(); await later.promise; return 'held' })
  const shedOnce = async (): Promise<string | undefined> => {
    const held = a.inject('/held')
    await entered.promise
    const shed = await a.inject('/')
    t.equal(shed.statusCode, 503)
    hold.resolve()
    await held
    return shed.headers['retry-after'] as string | undefined
  }
  t.equal(await shedOnce(), '1', 'before any sample: 1')
  for (let i = 0; i < 2; i++) await a.inject('/')
  t.equal(a.admission.limit, 1)
  const held = a.inject('/held2')
  await enteredAgain.promise
  const shed = await a.inject('/')
  t.equal(shed.headers['retry-after'], '3', '2.5 s measured: 3 s')
  later.resolve()
  await held
  ms = 0.2
  t.equal(a.admission.stats().shed, 2)
})

t.test('a fixed limit and no limit in stats()', async (t) => {
  const fixed = await app(t, { maxInFlight: 8 })
  t.equal(fixed.admission.stats().limit, 8)
  t.equal(fixed.admission.limit, 8)
  const none = await app(t, { backend: memoryBackend() })
  t.equal(none.admission.stats().limit, false)
  t.equal(none.admission.limit, false)
})

/** Waits for `check` by turns of the event loop, not by timers (a test may have mocked them). */
async function turns (check: () => boolean, most = 10_000): Promise<boolean> {
  for (let i = 0; i < most && !check(); i++) await new Promise((resolve) => setImmediate(resolve))
  return check()
}

/** 200 requests at once to a route that holds them: how many the gate admits. */
async function burst (t: Test, a: FastifyInstance, release: { hold: { promise: Promise<void>, resolve: () => void } }): Promise<number> {
  release.hold = deferred()
  const shedBefore = a.admission.stats().shed
  const answers = Array.from({ length: 200 }, async () => await a.inject('/work'))
  t.ok(await turns(() => a.admission.stats().inFlight + a.admission.stats().shed - shedBefore === 200), 'each admitted or shed')
  const admitted = a.admission.stats().inFlight
  release.hold.resolve()
  await Promise.all(answers)
  return admitted
}

t.test('after 3 s of cheap 401s and 5 s idle, a burst is admitted as on a fresh server', async (t) => {
  const release = { hold: deferred() }
  const build = async (): Promise<FastifyInstance> => {
    const a = await app(t, { maxInFlight: { adaptive: true } })
    a.get('/work', async () => { await release.hold.promise; now += 10; return 'ok' })
    // A cheap refusal: 0.1 ms, and 1 ms on a busy turn of the event loop (5 answers of every 25).
    let n = 0
    a.get('/login', async (_request, reply) => { now += Math.floor(n++ / 5) % 5 === 0 ? 1 : 0.1; return await reply.code(401).send('no') })
    await a.ready()
    return a
  }
  const flooded = await build()
  const fresh = await build()
  mock.timers.enable({ apis: ['setTimeout'] })
  t.teardown(() => { mock.timers.reset() })
  // Ordinary load first, the limit in use: it grows.
  for (let i = 0; i < 15; i++) await round(t, flooded, release, 10, '/work', turns)
  const warm = flooded.admission.limit as number
  t.ok(warm > 20, `warm: ${warm}`)
  // The flood, one answer at a time, 2 ms apart.
  const end = now + 3_000
  while (now < end) {
    t.equal((await flooded.inject('/login')).statusCode, 401)
    now += 2
  }
  const low = flooded.admission.limit as number
  t.ok(low <= 10, `3 s of cheap 401s: ${low}`)
  now += 5_000
  mock.timers.tick(5_000)
  const admitted = await burst(t, flooded, release)
  const reference = await burst(t, fresh, release)
  t.ok(admitted >= 0.9 * reference, `after the flood and 5 s idle: ${admitted} of 200 admitted, a fresh server ${reference}`)
})

t.test('requests in turn on one keep-alive connection: each a sample (its permit ends responded, not taken for gone)', async (t) => {
  const { Agent, request } = await import('node:http')
  const a = await app(t, { maxInFlight: { adaptive: true } })
  timed(a, '/', () => 10)
  const port = await listen(a)
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  const sockets = new Set<unknown>()
  for (let i = 0; i < 4; i++) {
    await new Promise<void>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path: '/', agent }, (res) => { sockets.add(res.socket); res.resume(); res.on('end', resolve) })
      req.on('error', reject)
      req.end()
    })
  }
  t.equal(sockets.size, 1, 'one connection')
  t.ok(await eventually(() => samples.length === 4), `four samples (${samples.length})`)
  t.equal(a.admission.stats().inFlight, 0)
})
