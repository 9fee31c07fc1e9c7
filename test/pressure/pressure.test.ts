import t from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import admission from '../../lib/index.js'
import type { AdmissionOptions } from '../../lib/index.js'
import { scriptedReadings } from '../helpers/pressure.js'

/** An app with the plugin and one route, ready (the sampler has taken its first sample). */
async function appWith (options: AdmissionOptions, logs?: string[]): Promise<FastifyInstance> {
  const app = Fastify(logs === undefined ? {} : { logger: { level: 'info', stream: { write: (line: string) => { logs.push(line) } } } })
  await app.register(admission, { rateLimit: false, ...options })
  app.get('/', async () => 'ok')
  await app.ready()
  return app
}

const LIMITS = { maxEventLoopDelay: 50, maxEventLoopUtilization: 0.9, maxHeapUsedBytes: 10_000, maxRssBytes: 20_000 }

t.test('each signal over its limit sheds with the gate\'s 503, its Retry-After, counted by reason; back within, it admits', async (t) => {
  const source = scriptedReadings()
  const logs: string[] = []
  const shed: string[] = []
  const app = await appWith({ pressure: { ...LIMITS, sampleInterval: 10, retryAfter: 3, readings: source.read }, onShed: (request) => { shed.push(request.url) } }, logs)
  t.teardown(() => app.close())
  t.equal((await app.inject('/')).statusCode, 200)
  const cases = [
    ['eventLoopDelay', { eventLoopDelay: 51 }, 51, 50],
    ['heapUsedBytes', { heapUsedBytes: 10_001 }, 10_001, 10_000],
    ['rssBytes', { rssBytes: 20_001 }, 20_001, 20_000],
    ['eventLoopUtilization', { eventLoopUtilization: 0.95 }, 0.95, 0.9]
  ] as const
  for (const [signal, over, value, limit] of cases) {
    await source.set(over)
    const res = await app.inject('/')
    t.equal(res.statusCode, 503, signal)
    t.equal(res.headers['retry-after'], '3')
    t.same(res.json(), { statusCode: 503, error: 'Service Unavailable', message: 'Server is under pressure, retry in 3 seconds' })
    t.match(app.admission.pressure(), { underPressure: true, reason: { signal, value, limit } })
    // Back to the limit itself: not over (strictly above, as under-pressure compares).
    await source.set({ eventLoopDelay: 50, heapUsedBytes: 10_000, rssBytes: 20_000, eventLoopUtilization: 0.9 })
    t.equal((await app.inject('/')).statusCode, 200, `${signal} at its limit: admitted`)
    t.equal(app.admission.pressure()!.underPressure, false)
  }
  const stats = app.admission.stats()
  t.match(stats, { admitted: 5, shed: 4, routes: { 'GET /': { admitted: 5, shed: 4 } } })
  t.same(stats.pressure, { shed: { eventLoopDelay: 1, heapUsedBytes: 1, rssBytes: 1, healthCheck: 0, eventLoopUtilization: 1, queueDelay: 0 }, handled: 0 })
  t.same(shed, ['/', '/', '/', '/'], 'onShed is called for each, as for the in-flight gate')
  t.ok(logs.some((line) => line.includes('"level":40') && line.includes('under pressure (eventLoopDelay 51 > 50)')), 'entering pressure is logged at warn')
  t.ok(logs.some((line) => line.includes('"level":30') && line.includes('no longer under pressure (rssBytes back within its limit)')), 'leaving it at info')
})

t.test('the first signal over, in under-pressure\'s order, is the reason; the text body and the 404 hook take the same path', async (t) => {
  const source = scriptedReadings()
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: false, refusal: 'text', pressure: { ...LIMITS, sampleInterval: 10, readings: source.read } })
  app.setNotFoundHandler({ preHandler: app.admission.notFound }, async (_request, reply) => reply.code(404).send('none'))
  app.get('/', async () => 'ok')
  await app.ready()
  t.equal((await app.inject('/nowhere')).statusCode, 404)
  await source.set({ eventLoopDelay: 100, heapUsedBytes: 1e9, rssBytes: 1e9, eventLoopUtilization: 1 })
  t.match(app.admission.pressure(), { reason: { signal: 'eventLoopDelay' } })
  await source.set({ eventLoopDelay: 0 })
  t.match(app.admission.pressure(), { reason: { signal: 'heapUsedBytes' } })
  await source.set({ heapUsedBytes: 0 })
  t.match(app.admission.pressure(), { reason: { signal: 'rssBytes' } })
  await source.set({ rssBytes: 0 })
  t.match(app.admission.pressure(), { reason: { signal: 'eventLoopUtilization', value: 1, limit: 0.9 }, readings: { eventLoopUtilization: 1 }, limits: { eventLoopUtilization: 0.9 } })
  const res = await app.inject('/')
  t.equal(res.statusCode, 503)
  t.equal(res.headers['retry-after'], '1')
  t.equal(res.body, 'lim rejected')
  const lost = await app.inject('/nowhere')
  t.equal(lost.statusCode, 503, 'a 404 wired to app.admission.notFound is shed too')
  t.equal(app.admission.stats().routes['404']!.shed, 1)
})

t.test('pressureHandler is called instead of the 503, with the signal and its value, as under-pressure\'s', async (t) => {
  const source = scriptedReadings()
  const calls: unknown[] = []
  let mode = 'nullish'
  const app = await appWith({
    pressure: {
      maxHeapUsedBytes: 10_000,
      sampleInterval: 10,
      readings: source.read,
      pressureHandler: (request, reply, type, value) => {
        calls.push([type, value])
        if (mode === 'nullish') return undefined
        if (mode === 'null') return null
        if (mode === 'send') { void reply.code(507).send('handled'); return undefined }
        if (mode === 'value') return { busy: true }
        if (mode === 'promise') return Promise.resolve()
        if (mode === 'promise-send') return Promise.resolve().then(() => reply.code(202).send('later'))
        if (mode === 'reject') return Promise.reject(new Error('the handler failed'))
        throw new Error('the handler threw')
      }
    }
  })
  t.teardown(() => app.close())
  await source.set({ heapUsedBytes: 10_001 })
  const answers: Record<string, [number, string]> = {}
  for (mode of ['nullish', 'null', 'send', 'value', 'promise', 'promise-send', 'reject', 'throw']) {
    const res = await app.inject('/')
    answers[mode] = [res.statusCode, res.statusCode === 500 ? res.json().message : res.body]
  }
  t.same(answers, {
    nullish: [200, 'ok'],
    null: [200, 'ok'],
    send: [507, 'handled'],
    value: [200, '{"busy":true}'],
    promise: [200, 'ok'],
    'promise-send': [202, 'later'],
    reject: [503, '{"statusCode":503,"error":"Service Unavailable","message":"Server is under pressure, retry in 1 second"}'],
    throw: [503, '{"statusCode":503,"error":"Service Unavailable","message":"Server is under pressure, retry in 1 second"}']
  }, 'nullish or a promise: the request goes on through the gate; a value is the answer; a failure is the pressure 503, as without a handler')
  t.same(calls[0], ['heapUsedBytes', 10_001])
  t.equal(calls.length, 8)
  t.match(app.admission.stats(), { admitted: 3, shed: 2, pressure: { handled: 8, shed: { heapUsedBytes: 2 } } })
})

t.test('healthCheck: unhealthy until it passes; a throw is unhealthy and logged; its interval re-runs it', async (t) => {
  let healthy: unknown = false
  let runs = 0
  let ran: () => void = () => {}
  const logs: string[] = []
  const app = await appWith({
    pressure: {
      healthCheckInterval: 10,
      readings: scriptedReadings().read,
      healthCheck: async (fastify) => {
        runs++
        t.equal(typeof fastify.admission.stats, 'function', 'called with the Fastify instance')
        ran()
        if (healthy === 'throw') throw new Error('db down')
        return healthy
      }
    }
  }, logs)
  t.teardown(() => app.close())
  // The health timer is unref'd: hold the process up while waiting for it. Two runs: the one
  // under way may have read the old answer.
  const nextRun = async (): Promise<void> => {
    const hold = setInterval(() => {}, 1000)
    await new Promise<void>((resolve) => { ran = resolve })
    await new Promise<void>((resolve) => { ran = resolve })
    clearInterval(hold)
  }
  t.ok(runs >= 1, 'run once before the app is ready')
  let res = await app.inject('/')
  t.equal(res.statusCode, 503, 'the first run said false: unhealthy')
  t.match(app.admission.pressure(), { reason: { signal: 'healthCheck', value: undefined, limit: undefined } })
  healthy = { db: 'up' }
  await nextRun()
  t.equal((await app.inject('/')).statusCode, 200, 'an object is healthy')
  healthy = 'throw'
  await nextRun()
  res = await app.inject('/')
  t.equal(res.statusCode, 503)
  t.ok(logs.some((line) => line.includes('"level":50') && line.includes('healthCheck failed; the server counts as unhealthy until it passes')))
  t.match(app.admission.stats().pressure, { shed: { healthCheck: 2 } })
})

t.test('a reading that throws keeps the previous readings, logged; the timers stop at close', async (t) => {
  const source = scriptedReadings({ heapUsedBytes: 5 })
  let fail = false
  const logs: string[] = []
  const app = await appWith({
    pressure: { maxHeapUsedBytes: 10, sampleInterval: 10, readings: () => { if (fail) { source.read(); throw new Error('no /proc') } return source.read() } }
  }, logs)
  fail = true
  await source.sampled()
  await source.sampled()
  t.match(app.admission.pressure(), { underPressure: false, readings: { heapUsedBytes: 5 } })
  t.ok(logs.some((line) => line.includes('readings failed; keeping the previous readings')))
  await app.close()
  const reads = source.reads()
  await new Promise((resolve) => setTimeout(resolve, 40))
  t.equal(source.reads(), reads, 'no sample after close (four sample intervals later)')
})

t.test('off costs nothing: no pressure options, no timer, no status', async (t) => {
  // Unref'd timers are not in getActiveResourcesInfo(): count the ones made instead.
  const made: number[] = []
  const setTimer = globalThis.setTimeout
  globalThis.setTimeout = ((...args: Parameters<typeof setTimeout>) => {
    const timer = setTimer(...args)
    // Only the unref'd ones: Fastify's own (plugin timeouts) are not samplers.
    const unref = timer.unref.bind(timer)
    timer.unref = () => { made.push(Number(args[1])); return unref() }
    return timer
  }) as typeof setTimeout
  t.teardown(() => { globalThis.setTimeout = setTimer })
  const timers = (): number => made.length
  const before = timers()
  const off = Fastify()
  t.teardown(() => off.close())
  await off.register(admission, { maxInFlight: 10, rateLimit: false })
  off.get('/', async () => 'ok')
  await off.ready()
  t.equal(timers(), before, 'no timer')
  t.equal(off.admission.pressure(), undefined)
  t.equal(off.admission.stats().pressure, undefined)
  const on = Fastify()
  t.teardown(() => on.close())
  await on.register(admission, { queueDelay: true, pressure: { maxRssBytes: 1e15 }, rateLimit: false })
  on.get('/', async () => 'ok')
  await on.ready()
  t.same(made.slice(before), [1000, 10], 'the sampler (every second) and the delay probe (every 10 ms)')
  t.equal((await on.inject('/')).statusCode, 200)
  t.match(on.admission.pressure(), { underPressure: false, readings: { heapUsedBytes: Number }, queueDelay: { standing: false, cutMs: 100 } })
})

t.test('pressureHandler on a failed health check: the signal healthCheck, no value', async (t) => {
  const calls: unknown[] = []
  const app = await appWith({
    pressure: { healthCheck: () => false, exposeStatusRoute: true, pressureHandler: (_request, _reply, type, value) => { calls.push(type, value); return 'degraded' } }
  })
  t.teardown(() => app.close())
  t.equal((await app.inject('/')).body, 'degraded')
  t.same(calls, ['healthCheck', undefined])
})

t.test('start-up: the first reading is the delay since registration, never an empty one read as over a limit', async (t) => {
  // The process's own readings, at once after ready(): the delay since registration (under-pressure's
  // first reading is empty, which it reads as Infinity, and sheds everything for a sample).
  const app = await appWith({ pressure: { maxEventLoopDelay: 1000, retryAfter: 10, exposeStatusRoute: { expose: 'details' } } })
  t.teardown(() => app.close())
  const res = await app.inject('/')
  t.equal(res.statusCode, 200, 'served at once after start')
  t.equal(res.headers['retry-after'], undefined)
  const status = await app.inject('/status')
  t.equal(status.statusCode, 200)
  t.match(status.json(), { status: 'ok', underPressure: false, readings: { eventLoopDelay: Number } })
  t.ok(status.json().readings.eventLoopDelay < 1000, 'a reading, under the limit')
  t.notOk('reason' in status.json(), 'no reason, and no null value')
  t.equal(app.admission.stats().shed, 0)

  // A source's NaN is no reading: that signal keeps its previous value; the others are taken.
  const source = scriptedReadings({ eventLoopDelay: NaN })
  const scripted = await appWith({ pressure: { maxEventLoopDelay: 50, maxHeapUsedBytes: 10_000, sampleInterval: 10, readings: source.read } })
  t.teardown(() => scripted.close())
  t.equal((await scripted.inject('/')).statusCode, 200)
  t.match(scripted.admission.pressure(), { underPressure: false, readings: { eventLoopDelay: 0, heapUsedBytes: 1000 } })
  await source.set({ eventLoopDelay: 60 })
  t.match(scripted.admission.pressure(), { underPressure: true, reason: { signal: 'eventLoopDelay', value: 60, limit: 50 } })
  await source.set({ eventLoopDelay: NaN, heapUsedBytes: 2000 })
  t.match(scripted.admission.pressure(), { underPressure: true, reason: { value: 60 }, readings: { eventLoopDelay: 60, heapUsedBytes: 2000 } }, 'a window that measured nothing changes nothing')
  await source.set({ eventLoopDelay: 10 })
  t.equal((await scripted.inject('/')).statusCode, 200)
})
