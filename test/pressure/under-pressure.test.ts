import t, { type Test } from 'tap'
import { readFileSync } from 'node:fs'
import Fastify, { type FastifyInstance } from 'fastify'
import underPressure from '@fastify/under-pressure'
import createError from '@fastify/error'
import admission, * as ours from '../../lib/index.js'
import { TYPE_RSS_BYTES } from '../../lib/index.js'
import type { AdmissionOptions } from '../../lib/index.js'
import type { PressureOptions } from '../../lib/pressure/options.js'
import { processReadings } from '../../lib/pressure/signals.js'
import { scriptedReadings } from '../helpers/pressure.js'

// The table of docs/migration/under-pressure.md ("Coming from @fastify/under-pressure"), a test
// per row: every row must have one here, and every test here a row.

const PAGE = 'docs/migration/under-pressure.md'

function tableRows (): string[] {
  const page = readFileSync(PAGE, 'utf8')
  const at = page.indexOf('\n| @fastify/under-pressure |')
  if (at === -1) throw new Error(`${PAGE} has no table headed "| @fastify/under-pressure |"`)
  const table = page.slice(at + 1)
  const lines = table.split('\n')
  const end = lines.findIndex((line) => !line.startsWith('|'))
  return lines.slice(2, end).map((line) => line.split('|')[1]!.trim())
}

async function appWith (pressure: PressureOptions, options: AdmissionOptions = {}): Promise<FastifyInstance> {
  const app = Fastify()
  await app.register(admission, { rateLimit: false, ...options, pressure })
  app.get('/', async () => 'ok')
  await app.ready()
  return app
}

/** Holds the process up (the sampler's timer is unref'd) until `done` says so. */
async function until (done: () => boolean): Promise<void> {
  const hold = setInterval(() => {}, 1000)
  while (!done()) await new Promise((resolve) => setTimeout(resolve, 5))
  clearInterval(hold)
}

const ROWS: Record<string, (t: Test) => Promise<void>> = {
  '`maxEventLoopDelay`': async (t) => {
    const source = scriptedReadings()
    const app = await appWith({ maxEventLoopDelay: 50, sampleInterval: 10, readings: source.read })
    t.teardown(() => app.close())
    t.equal((await app.inject('/')).statusCode, 200)
    await source.set({ eventLoopDelay: 50.5 })
    t.equal((await app.inject('/')).statusCode, 503)
    // The process's own reading, as under-pressure computes it: the mean less the resolution,
    // never below 0; a reading from the first read on (under-pressure's first is Infinity, a shed).
    const own = processReadings()
    const first = own.read().eventLoopDelay
    t.ok(first >= 0 && first < Infinity, `a delay at once: ${first}`)
    await new Promise((resolve) => setTimeout(resolve, 30))
    const delay = own.read().eventLoopDelay
    t.ok(delay >= 0 && delay < Infinity, `a delay: ${delay}`)
    own.stop()
  },
  '`maxEventLoopUtilization`': async (t) => {
    const source = scriptedReadings()
    const app = await appWith({ maxEventLoopUtilization: 0.98, sampleInterval: 10, readings: source.read })
    t.teardown(() => app.close())
    await source.set({ eventLoopUtilization: 0.99 })
    t.match(app.admission.pressure(), { underPressure: true, reason: { signal: 'eventLoopUtilization', value: 0.99, limit: 0.98 } })
    const own = processReadings()
    t.ok(Number.isNaN(own.read().eventLoopUtilization), 'measured from the first read: no reading yet')
    await new Promise((resolve) => setTimeout(resolve, 20))
    const { eventLoopUtilization } = own.read()
    t.ok(eventLoopUtilization >= 0 && eventLoopUtilization <= 1, 'over the last sample, in [0, 1]')
    own.stop()
  },
  '`maxHeapUsedBytes`': async (t) => {
    // The process's real readings: any heap is over 1 byte.
    const app = await appWith({ maxHeapUsedBytes: 1 })
    t.teardown(() => app.close())
    const res = await app.inject('/')
    t.equal(res.statusCode, 503)
    t.match(app.admission.pressure(), { reason: { signal: 'heapUsedBytes', limit: 1 } })
    t.ok(app.admission.pressure()!.reason!.value! > 1_000_000, 'heapUsed in bytes')
  },
  '`maxRssBytes`': async (t) => {
    const app = await appWith({ maxRssBytes: 1 })
    t.teardown(() => app.close())
    t.equal((await app.inject('/')).statusCode, 503)
    t.match(app.admission.pressure(), { reason: { signal: 'rssBytes', limit: 1 } })
  },
  '`retryAfter`': async (t) => {
    const given = await appWith({ maxRssBytes: 1, retryAfter: 10 })
    t.teardown(() => given.close())
    t.equal((await given.inject('/')).headers['retry-after'], '10')
    const defaulted = await appWith({ maxRssBytes: 1, sampleInterval: 2_500 })
    t.teardown(() => defaulted.close())
    t.equal((await defaulted.inject('/')).headers['retry-after'], '3', 'the sample interval, rounded up')
    await t.rejects(appWith({ maxRssBytes: 1, sampleInterval: 2_500, retryAfter: 2 }), { code: 'ADMISSION_INVALID_OPTION', path: 'pressure.retryAfter' })
  },
  '`exposeStatusRoute`': async (t) => {
    const source = scriptedReadings()
    const app = await appWith({ maxEventLoopDelay: 50, sampleInterval: 10, readings: source.read, exposeStatusRoute: true })
    t.teardown(() => app.close())
    let res = await app.inject('/status')
    t.equal(res.statusCode, 200)
    t.same(res.json(), { status: 'ok' }, 'the status alone, as under-pressure\'s route answers')
    await source.set({ eventLoopDelay: 80 })
    res = await app.inject('/status')
    t.equal(res.statusCode, 503)
    t.equal(res.headers['retry-after'], '1')
    t.same(res.json(), { status: 'under-pressure' })
    t.equal(app.admission.stats().routes['GET /status'], undefined, 'not gated (a probe gets the answer, not a shed)')
    // The details, asked for.
    const own = scriptedReadings({ eventLoopDelay: 80 })
    const detailed = await appWith({ maxEventLoopDelay: 50, sampleInterval: 10, readings: own.read, exposeStatusRoute: { url: '/status', expose: 'details' } })
    t.teardown(() => detailed.close())
    res = await detailed.inject('/status')
    t.equal(res.statusCode, 503)
    t.match(res.json(), { status: 'under-pressure', underPressure: true, reason: { signal: 'eventLoopDelay', value: 80, limit: 50 }, readings: { eventLoopDelay: 80 }, limits: { eventLoopDelay: 50 } })
    await own.set({ eventLoopDelay: 0 })
    res = await detailed.inject('/status')
    t.equal(res.statusCode, 200)
    t.match(res.json(), { status: 'ok', underPressure: false, readings: { eventLoopDelay: 0 }, limits: { eventLoopDelay: 50 } })
    // A URL, route options and a schema.
    let config: unknown
    const given = { team: 'ops' }
    const custom = await appWith({
      maxRssBytes: 1e15,
      exposeStatusRoute: {
        url: '/alive',
        routeOpts: { config: given, logLevel: 'debug', onRequest: (request, _reply, done) => { config = request.routeOptions.config; done() } },
        routeSchemaOpts: { response: { 200: { type: 'object', properties: { status: { type: 'string' } } } } }
      }
    })
    t.teardown(() => custom.close())
    const alive = await custom.inject('/alive')
    t.equal(alive.statusCode, 200)
    t.same(alive.json(), { status: 'ok' }, 'the schema given shapes the body')
    t.match(config, { team: 'ops' }, 'the route options given')
    t.same(Object.keys(config as object).filter((key) => key !== 'url' && key !== 'method'), ['team'], 'and no key the application did not give')
    t.same(given, { team: 'ops' }, "the application's config object is not changed")
    t.equal(custom.admission.stats().routes['GET /alive'], undefined, 'not gated')
    t.equal((await appWith({ maxRssBytes: 1e15, exposeStatusRoute: '/up' }).then(async (a) => { const r = await a.inject('/up'); await a.close(); return r })).statusCode, 200)
  },
  '`healthCheck`': async (t) => {
    let answer: unknown = { db: 'up' }
    let runs = 0
    const app = await appWith({ healthCheck: async () => { runs++; return answer }, exposeStatusRoute: { expose: 'details' }, sampleInterval: 10 })
    t.teardown(() => app.close())
    let res = await app.inject('/status')
    t.equal(res.statusCode, 200)
    t.match(res.json(), { db: 'up', status: 'ok' }, 'an object it answers is merged into the body (with expose: \'details\')')
    // Its own `status` is the answer's, as under-pressure's route answers it (with either expose).
    answer = { status: 'degraded', db: 'slow' }
    while (res.json().status === 'ok') res = await app.inject('/status')
    t.equal(res.statusCode, 200)
    t.match(res.json(), { status: 'degraded', db: 'slow', underPressure: false })
    const plain = await appWith({ healthCheck: () => ({ status: 'degraded', db: 'slow' }), exposeStatusRoute: true })
    t.teardown(() => plain.close())
    t.same((await plain.inject('/status')).json(), { status: 'degraded' }, 'the status alone by default')
    answer = { db: 'up' }
    answer = false
    // The status route runs it when its answer is older than sampleInterval: ask until it has.
    while (res.statusCode === 200) res = await app.inject('/status')
    t.equal(res.statusCode, 503)
    t.match(res.json(), { reason: { signal: 'healthCheck' } })
    t.equal((await app.inject('/')).statusCode, 503, 'and gated requests are shed until it passes')
    answer = true
    while (res.statusCode === 503) res = await app.inject('/status')
    t.equal((await app.inject('/')).statusCode, 200)
    t.ok(runs >= 3, 'run by the status route, at most once per sample interval')
    let timedRuns = 0
    const timed = await appWith({ healthCheck: () => ++timedRuns > 0, healthCheckInterval: 10 })
    await until(() => timedRuns >= 3)
    await timed.close()
    t.ok(timedRuns >= 3, 'healthCheckInterval re-runs it')
  },
  '`pressureHandler`': async (t) => {
    const seen: unknown[] = []
    const app = await appWith({
      maxRssBytes: 1,
      pressureHandler: (_request, reply, type, value) => { seen.push(type, typeof value); void reply.code(503).send({ busy: type }) }
    })
    t.teardown(() => app.close())
    const res = await app.inject('/')
    t.equal(res.statusCode, 503)
    t.same(res.json(), { busy: 'rssBytes' })
    t.same(seen, ['rssBytes', 'number'])
    t.match(app.admission.stats(), { shed: 0, pressure: { handled: 1 } })
    // One that throws is as if it were not given: the pressure 503 (under-pressure: a 500).
    const failing = await appWith({ maxRssBytes: 1, pressureHandler: () => { throw new Error('handler bug') } })
    t.teardown(() => failing.close())
    const shed = await failing.inject('/')
    t.equal(shed.statusCode, 503)
    t.equal(shed.headers['retry-after'], '1')
  },
  '`sampleInterval`': async (t) => {
    const source = scriptedReadings()
    const app = await appWith({ maxRssBytes: 1e15, sampleInterval: 10, readings: source.read })
    const first = source.reads()
    await source.sampled()
    await source.sampled()
    t.ok(source.reads() >= first + 2, 'read again every sampleInterval')
    await app.close()
    await t.rejects(appWith({ maxRssBytes: 1e15, sampleInterval: 9 }), { code: 'ADMISSION_INVALID_OPTION', path: 'pressure.sampleInterval' })
  },
  '`message`, `customError`': async (t) => {
    // under-pressure's own answer, then the same through errorResponseBuilder and its error class.
    const peer = Fastify()
    t.teardown(() => peer.close())
    await peer.register(underPressure, { healthCheck: async () => false, healthCheckInterval: 10 })
    const peerHandled: string[] = []
    peer.setErrorHandler((error: { code?: string }, _request, reply) => { peerHandled.push(String(error.code)); return reply.send(error) })
    peer.get('/', async () => 'ok')
    await peer.ready()
    await until(() => peer.isUnderPressure())
    const theirs = await peer.inject('/')
    const UnderPressureError = createError('FST_UNDER_PRESSURE', 'Service Unavailable', 503)
    const app = await appWith({ healthCheck: async () => false, healthCheckInterval: 10, retryAfter: 10 }, { errorResponseBuilder: () => new UnderPressureError() })
    t.teardown(() => app.close())
    const ourHandled: string[] = []
    await until(() => app.admission.pressure()!.underPressure)
    const ours = await app.inject('/')
    t.equal(ours.statusCode, theirs.statusCode)
    t.equal(ours.body, theirs.body, `the same body: ${theirs.body}`)
    t.equal(ours.headers['content-type'], theirs.headers['content-type'])
    t.equal(ours.headers['retry-after'], theirs.headers['retry-after'], 'Retry-After 10, with retryAfter: 10')
    // The error handler sees the same error.
    const handled = Fastify()
    t.teardown(() => handled.close())
    let inner: FastifyInstance | undefined
    await handled.register(async (scope) => {
      inner = scope
      scope.setErrorHandler((error: { code?: string }, _request, reply) => { ourHandled.push(String(error.code)); return reply.send(error) })
      await scope.register(admission, { rateLimit: false, pressure: { healthCheck: async () => false, healthCheckInterval: 10 }, errorResponseBuilder: () => new UnderPressureError() })
      scope.get('/', async () => 'ok')
    })
    await handled.ready()
    await until(() => inner!.admission.pressure()!.underPressure)
    await handled.inject('/')
    t.same(ourHandled, peerHandled, 'setErrorHandler sees FST_UNDER_PRESSURE on both')
    t.same(peerHandled, ['FST_UNDER_PRESSURE'])
    // The built-in bodies instead.
    const text = await appWith({ maxRssBytes: 1 }, { refusal: 'text' })
    t.teardown(() => text.close())
    t.equal((await text.inject('/')).body, 'lim rejected')
    const json = await appWith({ maxRssBytes: 1 })
    t.teardown(() => json.close())
    t.same((await json.inject('/')).json(), { statusCode: 503, error: 'Service Unavailable', message: 'Server is under pressure, retry in 1 second' })
  },
  '`memoryUsage()`, `isUnderPressure()`': async (t) => {
    // `pressure: {}`, as under-pressure registered without options: readings, nothing shed.
    const app = await appWith({})
    t.teardown(() => app.close())
    t.equal((await app.inject('/')).statusCode, 200)
    const status = app.admission.pressure()!
    t.equal(status.underPressure, false)
    t.same(status.limits, {})
    t.ok(status.readings!.heapUsedBytes > 0 && status.readings!.rssBytes > status.readings!.heapUsedBytes / 100)
    t.type(status.readings!.eventLoopDelay, 'number')
    t.type(status.readings!.eventLoopUtilization, 'number')
    // under-pressure's names of memoryUsage()'s fields, and this plugin's.
    const theirs = Fastify()
    t.teardown(() => theirs.close())
    await theirs.register(underPressure)
    await theirs.ready()
    t.same(Object.keys((theirs as unknown as { memoryUsage: () => object }).memoryUsage()).sort(), ['eventLoopDelay', 'eventLoopUtilized', 'heapUsed', 'rssBytes'])
    t.same(Object.keys(status.readings!).sort(), ['eventLoopDelay', 'eventLoopUtilization', 'heapUsedBytes', 'rssBytes'])
    // Without `pressure`, nothing is sampled.
    const off = Fastify()
    t.teardown(() => off.close())
    await off.register(admission, { rateLimit: false })
    t.equal(off.admission.pressure(), undefined)
  },
  '`TYPE_EVENT_LOOP_DELAY`, … (`TYPE_*`)': async (t) => {
    const names = ['TYPE_EVENT_LOOP_DELAY', 'TYPE_EVENT_LOOP_UTILIZATION', 'TYPE_HEALTH_CHECK', 'TYPE_HEAP_USED_BYTES', 'TYPE_RSS_BYTES'] as const
    for (const name of names) t.equal(ours[name], (underPressure as unknown as Record<string, string>)[name], name)
    const seen: unknown[] = []
    const app = await appWith({ maxRssBytes: 1, pressureHandler: (_request, _reply, type) => { seen.push(type); return 'busy' } })
    t.teardown(() => app.close())
    await app.inject('/')
    t.same(seen, [TYPE_RSS_BYTES], "pressureHandler's type")
    t.equal(app.admission.pressure()!.reason!.signal, TYPE_RSS_BYTES)
  },
  '`routeResponseSchemaOpts`, the route\'s response schema': async (t) => {
    await t.rejects(appWith({ exposeStatusRoute: { routeResponseSchemaOpts: {} } } as PressureOptions), { code: 'ADMISSION_INVALID_OPTION', path: 'pressure.exposeStatusRoute.routeResponseSchemaOpts' })
    // No schema unless given: the body is the handler's, `{ status }` alone by default. One given in
    // routeSchemaOpts (for @fastify/swagger, say) is the route's.
    const app = await appWith({
      healthCheck: () => ({ db: 'up' }),
      exposeStatusRoute: { expose: 'details', routeSchemaOpts: { response: { 200: { type: 'object', properties: { status: { type: 'string' }, db: { type: 'string' } } } } } }
    })
    t.teardown(() => app.close())
    t.same((await app.inject('/status')).json(), { status: 'ok', db: 'up' }, 'the schema given shapes the body (the details dropped)')
  }
}

t.test(`every row of the table in ${PAGE} has its test, and every test its row`, async (t) => {
  t.same(tableRows(), Object.keys(ROWS))
})

for (const [row, test] of Object.entries(ROWS)) t.test(`row ${row}`, test)
