import t from 'tap'
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import admission from '../../lib/index.js'
import { deferred, eventually, get, getThenAbort, listen, sleep, type Teardown } from '../helpers/http.js'

// A slot is given back exactly once, whichever way the request ends. Each test reads
// `stats().inFlight` while work is held, then after it ends.

async function gated (t: Teardown, maxInFlight = 4, serverOptions = {}): Promise<FastifyInstance> {
  const app = Fastify(serverOptions)
  t.teardown(() => app.close())
  await app.register(admission, { maxInFlight, rateLimit: false })
  return app
}


t.test('a plain response releases on onResponse', async (t) => {
  const app = await gated(t)
  const hold = deferred()
  const entered = deferred()
  app.get('/', async () => { entered.resolve(); await hold.promise; return 'ok' })
  const port = await listen(app)
  const answer = get(port, '/')
  await entered.promise
  t.equal(app.admission.stats().inFlight, 1, 'held while the handler runs')
  hold.resolve()
  t.equal((await answer).status, 200)
  t.ok(await eventually(() => app.admission.stats().inFlight === 0), 'given back')
})

t.test('throws, 404s and refusals give the slot back', async (t) => {
  const app = await gated(t, 1)
  app.get('/sync-throw', () => { throw new Error('sync') })
  app.get('/async-throw', async () => { throw new Error('async') })
  app.get('/guarded', { preHandler: async (_req, reply) => reply.code(401).send('no') }, async () => 'never')
  for (const [url, status] of [['/sync-throw', 500], ['/async-throw', 500], ['/missing', 404], ['/guarded', 401]] as const) {
    const res = await app.inject(url)
    t.equal(res.statusCode, status, url)
    t.equal(app.admission.stats().inFlight, 0, `${url} gave its slot back`)
  }
})

t.test('a later onRequest hook that answers: the slot still comes back', async (t) => {
  const app = await gated(t, 1)
  app.addHook('onRequest', async (_req, reply) => reply.code(403).send('later guard'))
  app.get('/', async () => 'never')
  t.equal((await app.inject('/')).statusCode, 403)
  t.equal((await app.inject('/')).statusCode, 403, 'a leaked slot would shed this one')
  t.equal(app.admission.stats().inFlight, 0)
})

t.test('an earlier guard that answers first takes and returns nothing of ours', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  app.addHook('onRequest', async (req, reply) => { if (req.url === '/guarded') return reply.code(401).send('guard') })
  await app.register(admission, { maxInFlight: 1, rateLimit: false })
  const hold = deferred()
  const entered = deferred()
  app.get('/slow', async () => { entered.resolve(); await hold.promise; return 'slow' })
  app.get('/guarded', async () => 'never')
  const port = await listen(app)
  const slow = get(port, '/slow')
  await entered.promise
  t.equal((await get(port, '/guarded')).status, 401)
  t.equal(app.admission.stats().inFlight, 1, 'the guarded request did not release the slow one')
  t.equal((await get(port, '/slow')).status, 503, 'the gate is still full')
  hold.resolve()
  await slow
  t.ok(await eventually(() => app.admission.stats().inFlight === 0))
})

/**
 * An app with a gate of 1 whose `/` runs `makeHandler(hold)` (`also(hold)` beside it), and `/other`;
 * one request to `/` whose client leaves while the handler runs. `hold` lets the handler's work end.
 */
async function abortedWhileHandling (t: Teardown, makeHandler: (hold: Promise<void>) => unknown, also: (hold: Promise<void>) => void = () => {}): Promise<{ app: FastifyInstance, port: number, hold: ReturnType<typeof deferred<void>> }> {
  const app = await gated(t, 1)
  const hold = deferred()
  const entered = deferred()
  const aborted = deferred()
  app.addHook('onRequestAbort', async (_req) => { aborted.resolve() })
  const inner = makeHandler(hold.promise) as (...args: unknown[]) => unknown
  app.get('/', function (req, reply) {
    entered.resolve()
    const out = inner(req, reply)
    also(hold.promise)
    return out as never
  })
  app.get('/other', async () => 'ok')
  const port = await listen(app)
  await getThenAbort(port, '/', entered.promise)
  await aborted.promise
  return { app, port, hold }
}

t.test('client abort: held until the handler finishes, then released once', async (t) => {
  const cases = {
    'async handler returning a value': (hold: Promise<void>) => async () => { await hold; return 'late' },
    'async handler returning undefined': (hold: Promise<void>) => async () => { await hold }
  }
  for (const [name, makeHandler] of Object.entries(cases)) {
    await t.test(name, async (t) => {
      let finished = 0
      const { app, port, hold } = await abortedWhileHandling(t, makeHandler, (hold) => { void hold.then(() => { finished++ }) })
      await sleep(20)
      t.equal(app.admission.stats().inFlight, 1, 'still held: the handler is still running')
      t.equal((await get(port, '/')).status, 503, 'so the gate refuses a second one')
      hold.resolve()
      t.ok(await eventually(() => app.admission.stats().inFlight === 0), 'released when the handler ended')
      t.equal(finished, 1)
      t.equal((await get(port, '/')).status, 200, 'the slot is usable again')
      t.equal(app.admission.stats().inFlight, 0, 'and not released twice (never below zero, never extra)')
    })
  }
})

t.test('client abort after the handler returned with no promise: released at once, whatever it sends later', async (t) => {
  // A proxy's way (@fastify/reply-from): `return reply`, and a send that never comes for an
  // aborted request. A callback that sends later looks the same: what a returned handler left
  // running is not followed, only a pending promise is.
  const cases = {
    'return reply, never sending': () => (_req: unknown, reply: unknown) => reply,
    'callback handler sending later': (hold: Promise<void>) => (_req: unknown, reply: { send: (v: string) => void }) => {
      void hold.then(() => { reply.send('late') })
    }
  }
  for (const [name, makeHandler] of Object.entries(cases)) {
    await t.test(name, async (t) => {
      const { app, port, hold } = await abortedWhileHandling(t, makeHandler)
      t.ok(await eventually(() => app.admission.stats().inFlight === 0), 'released once the client left')
      t.equal((await get(port, '/other')).status, 200, 'the next request is served')
      hold.resolve()
      await sleep(20)
      t.equal(app.admission.stats().inFlight, 0, 'a late send releases nothing twice')
      t.equal((await get(port, '/other')).status, 200)
    })
  }
})

t.test('abort before the handler starts: the handler still runs, the slot waits for it', async (t) => {
  const app = await gated(t, 1)
  const inPreHandler = deferred()
  const letPreHandlerGo = deferred()
  const hold = deferred()
  const handlerRan = deferred()
  app.get('/', {
    preHandler: async () => { inPreHandler.resolve(); await letPreHandlerGo.promise }
  }, async () => { handlerRan.resolve(); await hold.promise })
  const port = await listen(app)
  await getThenAbort(port, '/', inPreHandler.promise)
  await sleep(20)
  t.equal(app.admission.stats().inFlight, 1)
  letPreHandlerGo.resolve()
  await handlerRan.promise
  await sleep(10)
  t.equal(app.admission.stats().inFlight, 1, 'the handler runs after the abort and holds the slot')
  hold.resolve()
  t.ok(await eventually(() => app.admission.stats().inFlight === 0))
})

t.test('abort before the handler starts, and a handler that returns with no promise: released when it returns', async (t) => {
  const handlers: Record<string, (late: (send: () => unknown) => void) => (request: FastifyRequest, reply: FastifyReply) => unknown> = {
    'a callback sending later': (late) => (_request, reply) => { late(() => reply.send('late')) },
    'a value': () => () => 'value'
  }
  for (const [name, make] of Object.entries(handlers)) {
    await t.test(name, async (t) => {
      const app = await gated(t, 1)
      const inPreHandler = deferred()
      const letPreHandlerGo = deferred()
      const returned = deferred()
      let late: Promise<unknown> = Promise.resolve()
      const handler = make((send) => { late = sleep(30).then(send) })
      app.get('/', {
        preHandler: async () => { inPreHandler.resolve(); await letPreHandlerGo.promise }
      }, (request, reply) => {
        const out = handler(request, reply)
        returned.resolve()
        return out
      })
      app.get('/other', async () => 'ok')
      const port = await listen(app)
      await getThenAbort(port, '/', inPreHandler.promise)
      await sleep(20)
      t.equal(app.admission.stats().inFlight, 1, 'held while the hooks run')
      letPreHandlerGo.resolve()
      await returned.promise
      t.ok(await eventually(() => app.admission.stats().inFlight === 0), 'given back once the handler returned')
      await late
      t.equal((await get(port, '/other')).status, 200)
      t.equal(app.admission.stats().inFlight, 0, 'a late send gives nothing back twice')
    })
  }
})

t.test('abort when the response is already written but not finished releases at once', async (t) => {
  const app = await gated(t, 1)
  const entered = deferred()
  app.get('/', (_req, reply) => {
    reply.raw.writeHead(200, { 'content-type': 'text/plain' })
    reply.raw.write('partial')
    entered.resolve()
    // hijacked streams end on their own; this one never ends, the client goes away.
    reply.hijack()
  })
  const port = await listen(app)
  await getThenAbort(port, '/', entered.promise)
  t.ok(await eventually(() => app.admission.stats().inFlight === 0))
})

t.test('connection timeout: onTimeout then abort, released when the handler ends', async (t) => {
  const app = await gated(t, 1, { connectionTimeout: 50 })
  const hold = deferred()
  app.get('/', async () => { await hold.promise; return 'late' })
  const port = await listen(app)
  const answer = get(port, '/').catch(() => 'reset')
  t.equal(await answer, 'reset', 'the server dropped the connection')
  t.equal(app.admission.stats().inFlight, 1, 'the handler is still running')
  hold.resolve()
  t.ok(await eventually(() => app.admission.stats().inFlight === 0))
})

t.test('handler timeout: 503 is sent, the slot is held until the handler settles', async (t) => {
  const app = await gated(t, 1)
  const hold = deferred()
  app.get('/', { handlerTimeout: 30 }, async () => { await hold.promise; return 'late' })
  const res = await app.inject('/')
  t.equal(res.statusCode, 503)
  t.equal(app.admission.stats().inFlight, 1, 'the handler still runs')
  t.equal((await app.inject('/')).statusCode, 503, 'so no second handler starts')
  hold.resolve()
  t.ok(await eventually(() => app.admission.stats().inFlight === 0))
})

t.test('a root and a child registration are two gates; each counts a child route once', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { maxInFlight: 10, rateLimit: false })
  const hold = deferred()
  const entered = deferred()
  let child!: FastifyInstance
  await app.register(async (c) => {
    child = c
    await c.register(admission, { maxInFlight: 1, rateLimit: false })
    c.get('/child', async () => { entered.resolve(); await hold.promise; return 'child' })
  })
  const port = await listen(app)
  const first = get(port, '/child')
  await entered.promise
  t.equal(app.admission.stats().inFlight, 1, 'root gate counts it once')
  t.equal((await get(port, '/child')).status, 503, 'the child gate (max 1) is full')
  t.equal(app.admission.stats().inFlight, 1, 'the shed request took and returned the root slot')
  t.not(child.admission, app.admission, 'the child registration has a decorator of its own')
  t.match(child.admission.stats(), { inFlight: 1, shed: 1, admitted: 1 })
  t.match(app.admission.stats(), { inFlight: 1, shed: 0, admitted: 2 })
  hold.resolve()
  t.equal((await first).status, 200)
  t.ok(await eventually(() => app.admission.stats().inFlight === 0 && child.admission.stats().inFlight === 0))
})

t.test('handlers running at once never exceed maxInFlight, under a mix of endings', async (t) => {
  const max = 3
  const app = await gated(t, max)
  let running = 0
  let peak = 0
  const work = async (ms: number): Promise<void> => {
    running++
    peak = Math.max(peak, running)
    await sleep(ms)
    running--
  }
  app.get('/ok', async () => { await work(15); return 'ok' })
  app.get('/throw', async () => { await work(10); throw new Error('x') })
  app.get('/undef', async () => { await work(25) })
  const port = await listen(app)
  const jobs: Promise<unknown>[] = []
  for (let i = 0; i < 60; i++) {
    const path = ['/ok', '/throw', '/undef'][i % 3]!
    if (i % 4 === 0) jobs.push(getThenAbort(port, path, sleep(5)))
    else jobs.push(get(port, path).catch(() => undefined))
    if (i % 10 === 9) await sleep(5)
  }
  await Promise.all(jobs)
  t.ok(await eventually(() => running === 0 && app.admission.stats().inFlight === 0, 3000), 'all slots back')
  t.ok(peak <= max, `peak ${peak} <= ${max}`)
  t.ok(peak >= 2, 'the load did overlap')
})

t.test('HTTP/2: a stream reset while the handler runs releases when the handler ends', async (t) => {
  const { connect } = await import('node:http2')
  const app = Fastify({ http2: true })
  t.teardown(() => app.close())
  await app.register(admission, { maxInFlight: 1, rateLimit: false })
  const hold = deferred()
  const entered = deferred()
  app.get('/', async () => { entered.resolve(); await hold.promise; return 'late' })
  app.get('/fast', async () => 'fast')
  const port = await listen(app as unknown as FastifyInstance)
  const session = connect(`http://127.0.0.1:${port}`)
  t.teardown(() => session.close())
  const stream = session.request({ ':path': '/' })
  stream.on('error', () => {})
  await entered.promise
  stream.close()
  await sleep(20)
  t.equal(app.admission.stats().inFlight, 1, 'held: the handler still runs')
  hold.resolve()
  t.ok(await eventually(() => app.admission.stats().inFlight === 0), 'released when the handler ended')
  const status = await new Promise<number>((resolve) => {
    const again = session.request({ ':path': '/fast' })
    again.on('response', (headers) => { resolve(Number(headers[':status'])); again.resume() })
    again.end()
  })
  t.equal(status, 200, 'the permit is usable again, on the same session')
})
