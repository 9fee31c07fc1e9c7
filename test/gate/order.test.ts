// Order never matters: every route of the registering context and of its children is gated the
// same whether it was declared before or after the plugin, with or without `await`, for every
// part of the gate (rate limits, per-route overrides and opt-outs, in-flight limits, pressure,
// queueing delay, the 404 hook). A route no registration can gate (one in a sibling context)
// fails `ready()` with a typed error naming it and the fix — never a silent pass.
//
// The matrix: each order (how the application registers the plugin and declares its routes) ×
// each feature (what the routes ask for and what a client must see), one test per cell.
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance, type FastifyPluginAsync, type FastifyReply, type FastifyRequest, type HookHandlerDoneFunction } from 'fastify'
import fp from 'fastify-plugin'
import admission from '../../lib/index.js'
import type { AdmissionOptions } from '../../lib/index.js'
import { deferred, eventually, listen } from '../helpers/http.js'
import { scriptedReadings } from '../helpers/pressure.js'
import { rawSocket, statuses } from '../helpers/raw.js'

/** Declares a feature's routes (and not-found handler) on a context. */
type Declare = (context: FastifyInstance) => void

/**
 * One way to register the plugin and declare routes. `declare` is called exactly once, on the
 * context the routes belong to; the promise resolves when everything is registered (not ready).
 */
type Order = (app: FastifyInstance, options: AdmissionOptions, declare: Declare) => Promise<void>

/** A caller plugin wrapped with fastify-plugin that registers the plugin, awaiting it or not. */
const caller = (options: AdmissionOptions, awaits: boolean, declare?: Declare): FastifyPluginAsync => fp(async (f) => {
  if (awaits) await f.register(admission, options)
  else void f.register(admission, options)
  declare?.(f)
})

const ORDERS: Record<string, Order> = {
  '(a) await register, then routes': async (app, o, declare) => {
    await app.register(admission, o)
    declare(app)
  },
  '(b) register without await, routes in the same tick': async (app, o, declare) => {
    void app.register(admission, o)
    declare(app)
  },
  '(c) routes before register': async (app, o, declare) => {
    declare(app)
    await app.register(admission, o)
  },
  '(d) a child declaring routes, registered before the plugin': async (app, o, declare) => {
    void app.register(async (c) => { declare(c) })
    void app.register(admission, o)
  },
  '(d\') a child declaring routes, awaited, before the plugin': async (app, o, declare) => {
    await app.register(async (c) => { declare(c) })
    await app.register(admission, o)
  },
  '(e) a child registered after the plugin (no await)': async (app, o, declare) => {
    void app.register(admission, o)
    void app.register(async (c) => { declare(c) })
  },
  '(e\') a child registered after the awaited plugin': async (app, o, declare) => {
    await app.register(admission, o)
    await app.register(async (c) => { declare(c) })
  },
  '(f1) routes before an fp caller that awaits the plugin': async (app, o, declare) => {
    declare(app)
    void app.register(caller(o, true))
  },
  '(f2) routes before an fp caller that does not await it': async (app, o, declare) => {
    declare(app)
    void app.register(caller(o, false))
  },
  '(f3) routes after an fp caller (awaiting inside), same tick': async (app, o, declare) => {
    void app.register(caller(o, true))
    declare(app)
  },
  '(f4) routes after an fp caller (not awaiting inside), same tick': async (app, o, declare) => {
    void app.register(caller(o, false))
    declare(app)
  },
  '(f5) an fp caller declaring routes after its non-awaited register': async (app, o, declare) => {
    void app.register(caller(o, false, declare))
  },
  '(f6) an fp caller declaring routes after its awaited register': async (app, o, declare) => {
    void app.register(caller(o, true, declare))
  }
}

/**
 * The 404 hook for a context: `context.admission.notFound` where the decorator exists already;
 * where it cannot exist yet (the plugin is not loaded at this point of the code), the
 * application reads it when the request comes — the only way such code can be written.
 */
function notFoundHook (context: FastifyInstance): (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void {
  const now = (context as { admission?: FastifyInstance['admission'] }).admission
  if (now !== undefined) return now.notFound
  return function lateNotFound (this: FastifyInstance, request, reply, done) { context.admission.notFound.call(this, request, reply, done) }
}

interface Feature {
  options: AdmissionOptions
  declare: Declare
  /** Runs once `app.ready()` resolved. */
  check: (t: Test, app: FastifyInstance) => Promise<void>
}

const RATE = { limit: 2, windowMs: 60_000 }

const FEATURES: Record<string, () => Feature> = {
  'rate limit: 2 then 429, with the RateLimit headers': () => ({
    options: { rateLimit: RATE },
    declare: (c) => { c.get('/r', async () => 'ok') },
    check: async (t, app) => {
      const answers = [await app.inject('/r'), await app.inject('/r'), await app.inject('/r')]
      t.same(answers.map((a) => a.statusCode), [200, 200, 429], 'the third request is limited')
      for (const a of answers.slice(0, 2)) {
        t.type(a.headers.ratelimit, 'string', 'RateLimit on an admitted request')
        t.type(a.headers['ratelimit-policy'], 'string', 'RateLimit-Policy on an admitted request')
      }
      t.type(answers[2]!.headers['retry-after'], 'string', 'Retry-After on the 429')
      t.match(app.admission.stats(), { admitted: 2, limited: 1 })
    }
  }),

  'per-route override (limit 1) and opt-out (admission: false)': () => ({
    options: { rateLimit: RATE },
    declare: (c) => {
      c.get('/own', { config: { admission: { rateLimit: { limit: 1, windowMs: 60_000 } } } }, async () => 'ok')
      c.get('/open', { config: { admission: false } }, async () => 'ok')
    },
    check: async (t, app) => {
      t.same([(await app.inject('/own')).statusCode, (await app.inject('/own')).statusCode], [200, 429], 'the route\'s own limit of 1')
      const open = []
      for (let i = 0; i < 5; i++) open.push(await app.inject('/open'))
      t.same(open.map((a) => a.statusCode), [200, 200, 200, 200, 200], 'the opted-out route is never limited')
      t.notOk(open.some((a) => a.headers.ratelimit !== undefined || a.headers['ratelimit-policy'] !== undefined), 'and carries no RateLimit headers')
      t.match(app.admission.stats(), { admitted: 1, limited: 1 }, 'only the overriding route counts')
    }
  }),

  'in flight: maxInFlight 1 sheds a concurrent request, the permit comes back': () => {
    const hold = deferred()
    const entered = deferred()
    return {
      options: { maxInFlight: 1, rateLimit: false },
      // Only the first call waits: an ungated second request is answered at once (a 200, not a hang).
      declare: (c) => {
        let calls = 0
        c.get('/slow', async () => {
          if (++calls === 1) { entered.resolve(); await hold.promise }
          return 'slow'
        })
      },
      check: async (t, app) => {
        const first = app.inject('/slow')
        await entered.promise
        const second = await app.inject('/slow')
        t.equal(second.statusCode, 503, 'a second request while the first runs is shed')
        t.equal(second.headers['retry-after'], '1')
        t.equal(app.admission.stats().inFlight, 1, 'the first holds the permit')
        hold.resolve()
        t.equal((await first).statusCode, 200)
        t.ok(await eventually(() => app.admission.stats().inFlight === 0), 'the permit is given back')
        t.equal((await app.inject('/slow')).statusCode, 200, 'a new request is admitted')
        t.match(app.admission.stats(), { inFlight: 0, admitted: 2, shed: 1 })
      }
    }
  },

  'pressure: a signal over its limit sheds with 503': () => {
    const source = scriptedReadings()
    return {
      options: { rateLimit: false, pressure: { maxHeapUsedBytes: 10_000, sampleInterval: 10, readings: source.read } },
      declare: (c) => { c.get('/r', async () => 'ok') },
      check: async (t, app) => {
        t.equal((await app.inject('/r')).statusCode, 200, 'within the limits: admitted')
        await source.set({ heapUsedBytes: 10_001 })
        t.match(app.admission.pressure(), { underPressure: true })
        const res = await app.inject('/r')
        t.equal(res.statusCode, 503, 'under pressure: shed')
        t.type(res.headers['retry-after'], 'string')
        t.match(app.admission.stats(), { admitted: 1, shed: 1, pressure: { shed: { heapUsedBytes: 1 } } })
      }
    }
  },

  'queue delay: the request that waited over the cut is shed': () => {
    // A clock that moves 30 s at each read: five pipelined requests read in one turn are
    // 0, 30, 60, 90 and 120 s old; the fifth is over the 100 s interval (see delay-probe.test.ts).
    let now = 0
    return {
      options: { rateLimit: false, queueDelay: { targetMs: 5_000, intervalMs: 100_000, clock: () => (now += 30_000) } },
      declare: (c) => { c.get('/r', async () => 'ok') },
      check: async (t, app) => {
        const port = await listen(app)
        const { socket, received } = await rawSocket(port)
        t.teardown(() => socket.destroy())
        socket.write('GET /r HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(5))
        await eventually(() => statuses(received()).length === 5)
        t.same(statuses(received()), [200, 200, 200, 200, 503], 'the fifth is shed')
        t.match(app.admission.stats(), { admitted: 4, shed: 1, pressure: { shed: { queueDelay: 1 } } })
      }
    }
  },

  '404 hook: unknown URLs take from the shared quota': () => ({
    options: { rateLimit: RATE },
    declare: (c) => {
      c.get('/r', async () => 'ok')
      c.setNotFoundHandler({ preHandler: notFoundHook(c) }, async (_request, reply) => reply.code(404).send({ error: 'not found' }))
    },
    check: async (t, app) => {
      const codes = [(await app.inject('/nope-1')).statusCode, (await app.inject('/nope-2')).statusCode, (await app.inject('/nope-3')).statusCode]
      t.same(codes, [404, 404, 429], 'a path scanner is limited like any client')
      t.match(app.admission.stats().routes['404'], { admitted: 2, limited: 1 })
      t.equal((await app.inject('/r')).statusCode, 429, 'and the quota is the one the routes share')
    }
  })
}

for (const [orderName, order] of Object.entries(ORDERS)) {
  for (const [featureName, make] of Object.entries(FEATURES)) {
    t.test(`${orderName} × ${featureName}`, async (t) => {
      const feature = make()
      const app = Fastify()
      t.teardown(() => app.close())
      await order(app, feature.options, feature.declare)
      await app.ready()
      await feature.check(t, app)
    })
  }
}

// Nested registrations: one at the root, one in a child. The child's route passes both gates,
// the outer first, each counting it once on its own quota — whichever was declared first.
t.test('nested: a child route is gated by both registrations, the outer deciding first', async (t) => {
  type Nest = (app: FastifyInstance, outer: AdmissionOptions, inner: AdmissionOptions, route: Declare) => Promise<{ child: () => FastifyInstance }>
  const inChild = (routeFirst: boolean, inner: AdmissionOptions, route: Declare, seen: (c: FastifyInstance) => void) => async (c: FastifyInstance): Promise<void> => {
    seen(c)
    if (routeFirst) route(c)
    await c.register(admission, inner)
    if (!routeFirst) route(c)
  }
  const nests: Record<string, Nest> = {
    'root registered first, the child\'s route after its registration': async (app, outer, inner, route) => {
      let child!: FastifyInstance
      await app.register(admission, outer)
      await app.register(inChild(false, inner, route, (c) => { child = c }))
      return { child: () => child }
    },
    'root registered first, the child\'s route before its registration': async (app, outer, inner, route) => {
      let child!: FastifyInstance
      await app.register(admission, outer)
      await app.register(inChild(true, inner, route, (c) => { child = c }))
      return { child: () => child }
    },
    'root registered without await, the child in the same tick': async (app, outer, inner, route) => {
      let child!: FastifyInstance
      void app.register(admission, outer)
      void app.register(inChild(false, inner, route, (c) => { child = c }))
      return { child: () => child }
    },
    'the child (route after its registration) registered before the root\'s': async (app, outer, inner, route) => {
      let child!: FastifyInstance
      void app.register(inChild(false, inner, route, (c) => { child = c }))
      void app.register(admission, outer)
      return { child: () => child }
    },
    'the child (route before its registration) registered before the root\'s': async (app, outer, inner, route) => {
      let child!: FastifyInstance
      void app.register(inChild(true, inner, route, (c) => { child = c }))
      void app.register(admission, outer)
      return { child: () => child }
    }
  }
  for (const [name, nest] of Object.entries(nests)) {
    await t.test(`${name}: outer limit 2, inner 3 — the outer refuses the third`, async (t) => {
      const app = Fastify()
      t.teardown(() => app.close())
      const { child } = await nest(app, { rateLimit: { limit: 2, windowMs: 60_000 } }, { rateLimit: { limit: 3, windowMs: 60_000 } }, (c) => { c.get('/r', async () => 'ok') })
      await app.ready()
      const codes = []
      for (let i = 0; i < 4; i++) codes.push((await app.inject('/r')).statusCode)
      t.same(codes, [200, 200, 429, 429])
      t.match(app.admission.stats(), { admitted: 2, limited: 2 }, 'the outer registration refused')
      t.not(child().admission, app.admission, 'the child has its own registration')
      t.match(child().admission.stats(), { admitted: 2, limited: 0 }, 'the inner never saw the refused ones: the outer decides first')
    })
    await t.test(`${name}: outer limit 3, inner 2 — both count, the inner refuses the third`, async (t) => {
      const app = Fastify()
      t.teardown(() => app.close())
      const { child } = await nest(app, { rateLimit: { limit: 3, windowMs: 60_000 } }, { rateLimit: { limit: 2, windowMs: 60_000 } }, (c) => { c.get('/r', async () => 'ok') })
      await app.ready()
      const codes = []
      for (let i = 0; i < 3; i++) codes.push((await app.inject('/r')).statusCode)
      t.same(codes, [200, 200, 429])
      t.match(app.admission.stats(), { admitted: 3, limited: 0 }, 'the outer admitted all three')
      t.match(child().admission.stats(), { admitted: 2, limited: 1 }, 'the inner refused the third')
    })
  }
})

// A route that asks for a gate (config.admission) in a context no registration encloses.
t.test('a route no registration can gate: ready() fails with ADMISSION_UNGATED_ROUTE, naming it and the fix', async (t) => {
  const limit1 = { rateLimit: { limit: 1, windowMs: 60_000 } }
  const registerers: Record<string, (a: FastifyInstance) => Promise<void>> = {
    'a.register(admission)': async (a) => { await a.register(admission, limit1) },
    'an fp-wrapped caller in A': async (a) => { await a.register(caller(limit1, true)) },
    'an fp-wrapped caller in A, not awaiting inside': async (a) => { await a.register(caller(limit1, false)) }
  }
  for (const [how, register] of Object.entries(registerers)) {
    await t.test(`plugin by ${how}, sibling B declared after`, async (t) => {
      const app = Fastify()
      t.teardown(() => app.close())
      void app.register(async function a (a) {
        await register(a)
        a.get('/x', async () => 'a')
      }, { prefix: '/a' })
      void app.register(async function b (b) {
        b.get('/x', { config: { admission: { rateLimit: { limit: 5, windowMs: 60_000 } } } }, async () => 'b')
      }, { prefix: '/b' })
      const error = await app.ready().then(() => undefined, (e: unknown) => e) as { code?: string, message?: string } | undefined
      t.ok(error instanceof Error, 'ready() rejects')
      t.equal(error?.code, 'ADMISSION_UNGATED_ROUTE')
      t.match(error?.message, /GET \/b\/x\b/, 'the message names the route: method and URL')
      t.match(error?.message, /regist/i, 'and says to register the plugin...')
      t.match(error?.message, /\b(root|enclos\w*)\b/i, '...in a context that encloses the route (e.g. the root)')
    })
  }

  await t.test('a sibling route without config.admission is fine: not gated, no error', async (t) => {
    const app = Fastify()
    t.teardown(() => app.close())
    void app.register(async function a (a) {
      await a.register(admission, limit1)
      a.get('/x', async () => 'a')
    }, { prefix: '/a' })
    void app.register(async function b (b) {
      b.get('/y', async () => 'b')
      b.get('/off', { config: { admission: false } }, async () => 'b')
    }, { prefix: '/b' })
    await app.ready()
    const b = []
    for (let i = 0; i < 3; i++) b.push(await app.inject('/b/y'))
    t.same(b.map((r) => r.statusCode), [200, 200, 200], 'encapsulation: B is not gated')
    t.notOk(b.some((r) => r.headers.ratelimit !== undefined), 'no RateLimit headers')
    t.equal((await app.inject('/b/off')).statusCode, 200)
    t.same([(await app.inject('/a/x')).statusCode, (await app.inject('/a/x')).statusCode], [200, 429], 'A is gated')
  })

  await t.test('a sibling route with config.admission under a root registration: gated by it, no error', async (t) => {
    const app = Fastify()
    t.teardown(() => app.close())
    void app.register(admission, { rateLimit: false })
    void app.register(async function a (a) {
      await a.register(admission, limit1)
      a.get('/x', async () => 'a')
    }, { prefix: '/a' })
    void app.register(async function b (b) {
      b.get('/x', { config: { admission: { rateLimit: { limit: 1, windowMs: 60_000 } } } }, async () => 'b')
    }, { prefix: '/b' })
    await app.ready()
    t.same([(await app.inject('/b/x')).statusCode, (await app.inject('/b/x')).statusCode], [200, 429], 'the root registration gives B its gate')
  })

  await t.test('sibling B declared before A\'s registration', { todo: 'may be undetectable: B\'s route was added before any hook of the plugin existed' }, async (t) => {
    const app = Fastify()
    t.teardown(() => app.close())
    void app.register(async function b (b) {
      b.get('/x', { config: { admission: { rateLimit: { limit: 5, windowMs: 60_000 } } } }, async () => 'b')
    }, { prefix: '/b' })
    void app.register(async function a (a) {
      await a.register(admission, limit1)
    }, { prefix: '/a' })
    const error = await app.ready().then(() => undefined, (e: unknown) => e) as { code?: string, message?: string } | undefined
    t.equal(error?.code, 'ADMISSION_UNGATED_ROUTE')
    t.match(error?.message, /GET \/b\/x\b/)
  })
})

// A route declared before the plugin with an invalid config.admission: routes declared after
// it fail at ready(); an early one must not be silently ungated either. Either ready() rejects,
// or the route answers 500 with the option's error code — never 200.
t.test('an invalid config.admission: ADMISSION_INVALID_OPTION at ready(), or a 500 with that code, never a 200', async (t) => {
  const bad = { config: { admission: { maxInFlight: -1 } } }
  for (const [orderName, order] of Object.entries(ORDERS)) {
    await t.test(orderName, async (t) => {
      const app = Fastify()
      t.teardown(() => app.close())
      await order(app, { rateLimit: false }, (c) => { c.get('/bad', bad, async () => 'served') })
      const failure = await app.ready().then(() => undefined, (e: unknown) => e) as { code?: string } | undefined
      if (failure !== undefined) {
        t.equal(failure.code, 'ADMISSION_INVALID_OPTION', 'ready() rejects with the option error')
        return
      }
      const res = await app.inject('/bad')
      t.not(res.statusCode, 200, 'not served as if its config were valid')
      t.equal(res.statusCode, 500)
      let code: unknown
      try { code = (JSON.parse(res.body) as { code?: unknown }).code } catch { code = `no JSON body: ${res.body}` }
      t.equal(code, 'ADMISSION_INVALID_OPTION', 'the JSON body names the option error')
    })
  }
})
