// The application's callbacks run inside the gate's error boundary: whatever one throws or
// rejects with, the server answers as it would have without it (or, where there is no answer
// without it — a key, a tier, an allow list — a 500 of the application's error), logs it once for
// the route naming the callback, and leaves no unhandled rejection and no uncaught exception.
// Each on memory and on Redis (its real backend, on a scripted client: the decision comes by
// promise, as from a server). The whole suite runs with --unhandled-rejections=strict.
import t, { type Test } from 'tap'
import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify'
import admission, { DECISION_CHANNEL, memoryBackend, redisBackend, type AdmissionDecisionEvent, type AdmissionOptions, type RatesBackend } from '../../lib/index.js'
import type { PressureReadings } from '../../lib/pressure/signals.js'
import { deferred } from '../helpers/http.js'

type Backend = 'memory' | 'redis'
const BACKENDS: readonly Backend[] = ['memory', 'redis']

/** One request in a minute per client: a window of 1, so the second request is refused. */
const POLICY = { algorithm: 'fixed-window', limit: 1, windowMs: 60_000 } as const

/**
 * Redis as the gate meets it, without a server: the real backend on a client that answers as the
 * decision script does for a window of 1 — the first decision admitted, every later one refused
 * for 2001 ms.
 */
function scriptedRedis (): RatesBackend {
  let calls = 0
  const reply = async (): Promise<unknown> => {
    const resetAt = Date.now() + 30_000
    // A window: more comes when it ends (moreAt = resetAt), after the window's start and count.
    return calls++ === 0 ? [0, 1, 0, 0, resetAt, resetAt - 60_000, resetAt] : [0, 0, 0, 2001, resetAt, resetAt - 60_000, resetAt, resetAt - 60_000, 1]
  }
  return redisBackend({ client: { evalsha: reply, eval: reply }, denyCache: false })
}

/** The memory backend's time in gate(): 30 s into a window of POLICY. */
const MEMORY_NOW = 1_700_000_010_000

interface Logged { level: number, msg: string, callback?: string, route?: string, err?: { message?: string } }

interface Gate {
  app: FastifyInstance
  /** The plugin's error lines about a callback. */
  failures: () => Logged[]
}

async function gate (t: Test, backend: Backend, options: AdmissionOptions, routes: string[] = ['/'], declare?: (app: FastifyInstance) => void): Promise<Gate> {
  const lines: Logged[] = []
  const app = Fastify({ logger: { level: 'error', stream: { write: (line: string) => { lines.push(JSON.parse(line) as Logged) } } } })
  t.teardown(() => app.close())
  // Memory on a clock that stands still: a refusal's Retry-After is the same in every gate (on
  // the real clock it would tick down a second between two of them now and then).
  await app.register(admission, { rateLimit: POLICY, backend: backend === 'redis' ? scriptedRedis() : memoryBackend({ clock: () => MEMORY_NOW }), ...options })
  for (const url of routes) app.get(url, async () => 'ok')
  declare?.(app)
  await app.ready()
  return { app, failures: () => lines.filter((line) => line.callback !== undefined) }
}

/** What a client sees of a refusal: everything but the RateLimit reset, which moves with the clock. */
function seen (res: { statusCode: number, headers: Record<string, unknown>, body: string }): unknown {
  return { status: res.statusCode, retryAfter: res.headers['retry-after'], policy: res.headers['ratelimit-policy'], remaining: String(res.headers.ratelimit).replace(/;t=\d+$/, ''), body: res.body }
}

type Failing = 'throw' | 'reject' | 'throw undefined' | 'throw a string'
const FAILINGS: readonly Failing[] = ['throw', 'reject', 'throw undefined']

/** A callback that fails as `how` says (a rejection is an async callback's). */
function failing (how: Failing, calls: unknown[]): (...args: unknown[]) => unknown {
  return (...args) => {
    calls.push(args.length)
    if (how === 'reject') return Promise.reject(new Error('rejected in the callback'))
    // eslint-disable-next-line @typescript-eslint/no-throw-literal
    throw how === 'throw' ? new Error('thrown in the callback') : how === 'throw a string' ? 'a bare string' : undefined
  }
}

for (const backend of BACKENDS) {
  t.test(`${backend}: onLimit that throws or rejects changes nothing of the 429; logged once for the route, naming onLimit`, async (t) => {
    const plain = await gate(t, backend, {})
    await plain.app.inject('/')
    const expected = seen(await plain.app.inject('/'))
    for (const how of FAILINGS) {
      const calls: unknown[] = []
      const { app, failures } = await gate(t, backend, { onLimit: failing(how, calls) as AdmissionOptions['onLimit'] })
      t.equal((await app.inject('/')).statusCode, 200, how)
      t.same(seen(await app.inject('/')), expected, `${how}: the same refusal as without onLimit`)
      t.same(seen(await app.inject('/')), expected, `${how}: and again`)
      t.equal(calls.length, 2, 'called for each refusal')
      t.match(failures(), [{ level: 50, callback: 'onLimit', route: 'GET /', msg: /onLimit failed for GET \/; the request is refused as without it/, err: how === 'throw undefined' ? 'undefined (undefined)' : { message: /in the callback/ } }], `${how}: logged once`)
      t.equal(failures().length, 1)
      t.match(app.admission.stats(), { admitted: 1, limited: 2, inFlight: 0 })
    }
  })

  t.test(`${backend}: an async onLimit that fails, works, then fails again is logged again`, async (t) => {
    let fails = true
    let told = deferred()
    const { app, failures } = await gate(t, backend, {
      onLimit: async () => {
        told.resolve()
        if (fails) throw new Error('async onLimit bug')
      }
    })
    const refuse = async (): Promise<void> => {
      told = deferred()
      t.equal((await app.inject('/')).statusCode, 429)
      await told.promise
      await new Promise((resolve) => setImmediate(resolve))
    }
    t.equal((await app.inject('/')).statusCode, 200)
    await refuse()
    await refuse()
    t.equal(failures().length, 1)
    fails = false
    await refuse()
    fails = true
    await refuse()
    t.equal(failures().length, 2, 'a failure after a success is logged again')
  })

  t.test(`${backend}: onShed that throws or rejects changes nothing of the 503`, async (t) => {
    for (const how of FAILINGS) {
      const release = deferred()
      const { app, failures } = await gate(t, backend, { maxInFlight: 1, rateLimit: false, onShed: failing(how, []) as AdmissionOptions['onShed'] }, ['/'],
        (app) => { app.get('/slow', async () => { await release.promise; return 'slow' }) })
      const held = app.inject('/slow')
      await new Promise((resolve) => setImmediate(resolve))
      for (let i = 0; i < 2; i++) {
        const res = await app.inject('/')
        t.equal(res.statusCode, 503, how)
        t.equal(res.headers['retry-after'], '1')
        t.match(res.json(), { message: 'Server is at capacity, retry in 1 second' })
      }
      release.resolve()
      t.equal((await held).statusCode, 200)
      t.match(failures(), [{ callback: 'onShed', route: 'GET /' }], `${how}: logged once`)
      t.equal(failures().length, 1)
    }
  })

  t.test(`${backend}: errorResponseBuilder that throws: the built-in body, logged once per route`, async (t) => {
    const { app, failures } = await gate(t, backend, { errorResponseBuilder: () => { throw new Error('no body') } }, ['/a', '/b'])
    for (const url of ['/a', '/a', '/a', '/b', '/b']) await app.inject(url)
    const res = await app.inject('/b')
    t.equal(res.statusCode, 429)
    t.match(res.json(), { statusCode: 429, message: /^Rate limit exceeded/ })
    t.same(failures().map((line) => [line.callback, line.route]), [['errorResponseBuilder', 'GET /a'], ['errorResponseBuilder', 'GET /b']])
  })

  t.test(`${backend}: key, tier and allowList that throw: a 500 (never a pass), logged once for the route`, async (t) => {
    const tiered = { tiers: { free: POLICY }, tier: (): string => 'free' }
    const cases: Array<[string, (how: Failing) => AdmissionOptions]> = [
      ['key', (how) => ({ key: failing(how, []) as (request: FastifyRequest) => string })],
      ['tier', (how) => ({ rateLimit: { ...tiered, tier: failing(how, []) as () => string } })],
      ['allowList', (how) => ({ allowList: failing(how, []) as () => boolean })]
    ]
    for (const [callback, options] of cases) {
      for (const how of ['throw', 'throw undefined', 'throw a string'] as const) {
        const { app, failures } = await gate(t, backend, { maxInFlight: 1, ...options(how) })
        for (let i = 0; i < 2; i++) {
          const res = await app.inject('/')
          t.equal(res.statusCode, 500, `${callback}, ${how}: a 500, the handler never ran`)
          t.notMatch(res.body, /^ok$/)
          if (how === 'throw') t.match(res.json(), { message: 'thrown in the callback' }, 'the application\'s own error')
          else t.match(res.json(), { code: 'ADMISSION_CALLBACK_FAILED', message: `The \`${callback}\` callback threw ${how === 'throw undefined' ? 'undefined' : 'a string'}, not an Error` })
        }
        t.match(failures(), [{ callback, route: 'GET /' }], `${callback}, ${how}: logged once`)
        t.equal(failures().length, 1)
        t.equal(app.admission.stats().inFlight, 0, 'the permit given back')
      }
    }
  })

  t.test(`${backend}: a diagnostics subscriber that throws or rejects changes no decision, ends nothing, logged once per route`, async (t) => {
    const heard: AdmissionDecisionEvent[] = []
    const throwing = (): void => { throw new Error('subscriber bug') }
    const rejecting = async (): Promise<void> => { throw new Error('async subscriber bug') }
    const listening = (event: unknown): void => { heard.push(event as AdmissionDecisionEvent) }
    for (const subscriber of [throwing, rejecting, listening]) subscribe(DECISION_CHANNEL, subscriber)
    t.teardown(() => { for (const subscriber of [throwing, rejecting, listening]) unsubscribe(DECISION_CHANNEL, subscriber) })
    const { app, failures } = await gate(t, backend, {}, ['/a', '/b'])
    const statuses = []
    for (const url of ['/a', '/a', '/b']) statuses.push((await app.inject(url)).statusCode)
    await new Promise((resolve) => setImmediate(resolve))
    t.same(statuses, [200, 429, 429])
    t.same(heard.map((event) => [event.route, event.outcome]), [['GET /a', 'admitted'], ['GET /a', 'limited'], ['GET /b', 'limited']], 'the other subscribers hear every decision')
    t.same(failures().map((line) => [line.callback, line.route, line.err?.message]), [
      ['a subscriber of fastify-admission:decision', 'GET /a', 'subscriber bug'],
      ['a subscriber of fastify-admission:decision', 'GET /b', 'subscriber bug']
    ], 'logged once per route (the first failing subscriber)')
  })

  t.test(`${backend}: pressureHandler that throws or rejects: the pressure 503, as without it`, async (t) => {
    const readings = (): PressureReadings => ({ eventLoopDelay: 0, eventLoopUtilization: 0, heapUsedBytes: 11, rssBytes: 0 })
    for (const how of FAILINGS) {
      const { app, failures } = await gate(t, backend, { pressure: { maxHeapUsedBytes: 10, retryAfter: 7, readings, pressureHandler: failing(how, []) as NonNullable<AdmissionOptions['pressure']>['pressureHandler'] } })
      for (let i = 0; i < 2; i++) {
        const res = await app.inject('/')
        t.equal(res.statusCode, 503, how)
        t.equal(res.headers['retry-after'], '7')
        t.match(res.json(), { message: 'Server is under pressure, retry in 7 seconds' })
      }
      t.match(app.admission.stats(), { shed: 2, pressure: { handled: 2, shed: { heapUsedBytes: 2 } } }, 'handed to the handler, then shed')
      t.match(failures(), [{ callback: 'pressureHandler', route: 'GET /' }], `${how}: logged once`)
      t.equal(failures().length, 1)
    }
    // A handler that answered before it failed keeps its answer.
    const { app } = await gate(t, backend, { pressure: { maxHeapUsedBytes: 10, readings, pressureHandler: async (_request, reply) => { await reply.code(507).send('answered'); throw new Error('then failed') } } })
    const res = await app.inject('/')
    t.equal(res.statusCode, 507)
    t.equal(res.body, 'answered')
  })
}

t.test('healthCheck that throws or rejects: unhealthy, logged once until it passes again', async (t) => {
  let how: Failing | 'pass' = 'throw'
  let runs = 0
  let ran = deferred()
  const { app, failures } = await gate(t, 'memory', {
    rateLimit: false,
    pressure: {
      healthCheckInterval: 10,
      readings: () => ({ eventLoopDelay: 0, eventLoopUtilization: 0, heapUsedBytes: 0, rssBytes: 0 }),
      healthCheck: async () => {
        runs++
        ran.resolve()
        if (how === 'pass') return true
        return failing(how, [])()
      }
    }
  })
  // The health timer is unref'd: hold the process up while waiting for its runs.
  const runsMore = async (n: number): Promise<void> => {
    const hold = setInterval(() => {}, 1000)
    for (const until = runs + n; runs < until;) {
      ran = deferred()
      await ran.promise
    }
    clearInterval(hold)
  }
  await runsMore(3)
  t.equal((await app.inject('/')).statusCode, 503)
  how = 'reject'
  await runsMore(3)
  t.equal(failures().length, 1, 'once while it fails, thrown or rejected')
  t.match(failures(), [{ callback: 'healthCheck', msg: /healthCheck failed; the server counts as unhealthy until it passes/ }])
  t.notOk('route' in failures()[0]!, 'a callback of the registration, not of a route')
  how = 'pass'
  await runsMore(2)
  t.equal((await app.inject('/')).statusCode, 200)
  how = 'throw undefined'
  await runsMore(2)
  t.equal(failures().length, 2, 'logged again after it passed')
})

for (const backend of BACKENDS) {
  t.test(`${backend}: a promise where an answer is due now (key, tier, allowList, errorResponseBuilder) is refused, and its rejection handled`, async (t) => {
    const rejecting = (): Promise<never> => Promise.reject(new Error('late and wrong'))
    const cases: Array<[string, AdmissionOptions, number, string | undefined]> = [
      ['key', { key: rejecting as unknown as (request: FastifyRequest) => string }, 500, 'ADMISSION_INVALID_KEY'],
      ['tier', { rateLimit: { tiers: { free: POLICY }, tier: rejecting as unknown as () => string } }, 500, 'ADMISSION_UNKNOWN_TIER'],
      ['allowList', { allowList: rejecting }, 500, 'ADMISSION_INVALID_ALLOW_LIST_RESULT'],
      ['errorResponseBuilder', { errorResponseBuilder: rejecting as unknown as () => object }, 429, undefined]
    ]
    for (const [callback, options, status, code] of cases) {
      const { app, failures } = await gate(t, backend, options)
      const first = await app.inject('/')
      const res = callback === 'errorResponseBuilder' ? await app.inject('/') : first
      t.equal(res.statusCode, status, callback)
      if (code !== undefined) t.match(res.json(), { code })
      else t.match(res.json(), { message: /^Rate limit exceeded/ }, 'the built-in body')
      t.match(failures(), [{ callback }], 'logged')
    }
    // The rejections happen a tick later: none is left unhandled (--unhandled-rejections=strict).
    await new Promise((resolve) => setImmediate(resolve))
  })

  for (const thrown of [new Error('logger bug'), undefined] as const) {
    t.test(`${backend}: a logger that throws (${String(thrown)}) as the gate refuses: a 500, never a pass, nothing unhandled`, async (t) => {
      const noop = (): void => {}
      // Only the request's debug line throws: the gate's refusal is logged there.
      const logger = { level: 'debug', fatal: noop, error: noop, warn: noop, info: noop, trace: noop, debug: noop, child: (): unknown => child }
      const child = { ...logger, debug: (): void => { throw thrown }, child: (): unknown => child }
      const app = Fastify({ loggerInstance: logger as unknown as FastifyInstance['log'] })
      t.teardown(() => app.close())
      await app.register(admission, { rateLimit: POLICY, maxInFlight: 1, ...(backend === 'redis' ? { backend: scriptedRedis() } : {}) })
      app.get('/', async () => 'ok')
      t.equal((await app.inject('/')).statusCode, 200)
      const res = await app.inject('/')
      t.equal(res.statusCode, 500)
      if (thrown === undefined) t.match(res.json(), { code: 'ADMISSION_CALLBACK_FAILED', message: 'Code the gate called threw undefined, not an Error' })
      else t.match(res.json(), { message: 'logger bug' })
      t.equal(app.admission.stats().inFlight, 0, 'nothing held')
    })
  }

  t.test(`${backend}: behind an async pressureHandler, a step that throws (a logger) answers 500, nothing unhandled`, async (t) => {
    const noop = (): void => {}
    const logger = { level: 'debug', fatal: noop, error: noop, warn: noop, info: noop, trace: noop, debug: noop, child: (): unknown => child }
    const child = { ...logger, debug: (): void => { throw new Error('logger bug') }, child: (): unknown => child }
    const app = Fastify({ loggerInstance: logger as unknown as FastifyInstance['log'] })
    t.teardown(() => app.close())
    await app.register(admission, {
      rateLimit: POLICY,
      ...(backend === 'redis' ? { backend: scriptedRedis() } : {}),
      pressure: { maxHeapUsedBytes: 10, readings: () => ({ eventLoopDelay: 0, eventLoopUtilization: 0, heapUsedBytes: 11, rssBytes: 0 }), pressureHandler: async () => {} }
    })
    app.get('/', async () => 'ok')
    t.equal((await app.inject('/')).statusCode, 200, 'the handler\'s promise, then on through the quota')
    t.equal((await app.inject('/')).statusCode, 500, 'refused by the quota, whose log line throws')
  })

  t.test(`${backend}: an async pressureHandler that rejects, logged by a logger that throws: a 500, nothing unhandled`, async (t) => {
    const noop = (): void => {}
    const logger = { level: 'debug', fatal: noop, error: (): void => { throw new Error('logger bug') }, warn: noop, info: noop, trace: noop, debug: noop, child: (): unknown => logger }
    const app = Fastify({ loggerInstance: logger as unknown as FastifyInstance['log'] })
    t.teardown(() => app.close())
    await app.register(admission, {
      rateLimit: POLICY,
      ...(backend === 'redis' ? { backend: scriptedRedis() } : {}),
      pressure: { maxHeapUsedBytes: 10, readings: () => ({ eventLoopDelay: 0, eventLoopUtilization: 0, heapUsedBytes: 11, rssBytes: 0 }), pressureHandler: async () => { throw new Error('handler bug') } }
    })
    app.get('/', async () => 'ok')
    t.equal((await app.inject('/')).statusCode, 500, 'the failure\'s log line throws in the promise\'s continuation: answered, not left hanging')
    t.equal(app.admission.stats().inFlight, 0, 'nothing held')
  })
}

t.test('a stack deciding by promise whose decision has no policies: the backend cannot decide (503), not a crash', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  const backend: RatesBackend = {
    kind: 'no-policies',
    limiter: () => { throw new Error('not used') },
    stop: async () => {},
    stack: (_address, policies) => ({
      policies,
      consume: async () => ({ allowed: true, denied: false, remaining: 1, resetAt: Date.now() + 1000 }) as never,
      check: async () => ({ allowed: true, denied: false, remaining: 1, resetAt: Date.now() + 1000 }) as never,
      state: async () => [],
      delete: async () => false
    })
  }
  await app.register(admission, { backend, rateLimit: [{ limit: 1, windowMs: 1000 }, { limit: 5, windowMs: 60_000 }] })
  app.get('/', async () => 'ok')
  const res = await app.inject('/')
  t.equal(res.statusCode, 503)
  t.match(app.admission.stats(), { unavailable: 1, inFlight: 0 })
})

t.test('where Node keeps no list of subscribers, the channel delivers itself', async (t) => {
  const { deliver } = await import('../../lib/metrics/events.js')
  const { Contained } = await import('../../lib/callbacks/contained.js')
  const published: unknown[] = []
  const channel = { name: 'x', publish: (message: unknown) => { published.push(message) } }
  deliver(channel as never, 'event', new Contained(Fastify().log, 'a subscriber', 'GET /', 'nothing'))
  t.same(published, ['event'])
})
