// Permits that must come back — each of these leaked for good once (regression tests).
//
// The rule: a permit comes back when the response ends, or when the connection (HTTP/2: the
// stream) is gone AND the handler's own work — its promise, its callback's `reply.send`, its
// stream — has ended, whichever way each of those is observed. Never before the work ends (the
// counterpart at the end), never later than that, never twice.
//
// Each scenario runs on real sockets (node:net, node:http, node:http2) and observes a leak two
// ways a user can: `stats().inFlight` must be back to 0 within a bounded wait, and a burst as large
// as the gate must then be admitted whole.
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import { createReadStream } from 'node:fs'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { connect as connectH2, constants as h2, type ClientHttp2Session } from 'node:http2'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import admission from '../../lib/index.js'
import type { AdmissionOptions } from '../../lib/index.js'
import { deferred, eventually, get, getThenAbort, listen, sleep } from '../helpers/http.js'
import { rawSocket } from '../helpers/raw.js'

/** How long a permit may take to come back once the work ended and the client is gone. */
const BACK_WITHIN_MS = 2000

/** A body that comes slowly: a 16 KB chunk every 5 ms, 400 of them (~2 s) unless destroyed first. */
function slowStream (): Readable {
  let sent = 0
  let timer: NodeJS.Timeout | undefined
  return new Readable({
    read () {
      timer = setTimeout(() => { this.push(++sent > 400 ? null : Buffer.alloc(16 * 1024, 'x')) }, 5)
    },
    destroy (error, callback) {
      clearTimeout(timer)
      callback(error)
    }
  })
}

let bigFile = ''
t.before(async () => {
  const dir = await mkdtemp(join(tmpdir(), 'admission-leaks-'))
  bigFile = join(dir, 'eight-megabytes.bin')
  await writeFile(bigFile, Buffer.alloc(8 * 1024 * 1024, 'y'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
})

/** An app with the plugin, torn down with the test. */
async function gated (t: Test, options: AdmissionOptions, serverOptions: Record<string, unknown> = {}): Promise<FastifyInstance> {
  const app = Fastify(serverOptions)
  t.teardown(() => app.close())
  await app.register(admission, options)
  return app
}

/**
 * A gated route `/hold` whose handler waits until the test lets it go, and `burst(n)`: n requests
 * at once, held until every one was either admitted (its handler entered) or answered (refused),
 * then let go; says how many were admitted and what each got.
 */
function holdRoute (app: FastifyInstance): { burst: (n: number, send: () => Promise<number>) => Promise<{ admitted: number, statuses: number[] }> } {
  let gate = deferred()
  let entered = 0
  // Its handlers wait for the whole burst to enter, however slow a busy machine makes that: a
  // server's handlerTimeout (a test's subject elsewhere) must not answer them first.
  app.get('/hold', { handlerTimeout: 600_000 }, async () => { entered++; await gate.promise; return 'held' })
  return {
    async burst (n, send) {
      const before = entered
      let answered = 0
      const answers = Array.from({ length: n }, () => send().then((status) => { answered++; return status }, () => { answered++; return 0 }))
      await eventually(() => entered - before + answered >= n, 5000)
      const admitted = entered - before
      gate.resolve()
      gate = deferred()
      return { admitted, statuses: await Promise.all(answers) }
    }
  }
}

/** Asserts the gate is empty again (within the bound) and admits a whole burst of `size`. */
async function allBack (t: Test, app: FastifyInstance, hold: ReturnType<typeof holdRoute>, size: number, send: () => Promise<number>): Promise<void> {
  const empty = await eventually(() => app.admission.stats().inFlight === 0, BACK_WITHIN_MS)
  t.ok(empty, `every permit is back (inFlight ${app.admission.stats().inFlight}, expected 0)`)
  const before = app.admission.stats().inFlight
  const { admitted, statuses } = await hold.burst(size, send)
  t.equal(admitted, size, `a burst of ${size} is admitted whole (admitted ${admitted})`)
  t.same(statuses, Array.from({ length: size }, () => 200), 'every one answered 200')
  t.ok(await eventually(() => app.admission.stats().inFlight === before, BACK_WITHIN_MS), 'and the burst\'s permits come back')
}

/** A GET on a raw socket, destroyed once the response's headers (and a first piece of body) came. */
async function headersThenClose (port: number, path: string): Promise<void> {
  const { socket, received } = await rawSocket(port)
  socket.on('error', () => {})
  socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`)
  const headers = await eventually(() => received().includes('\r\n\r\n'), 5000)
  if (!headers) throw new Error(`no response headers for ${path}`)
  socket.destroy()
}

const httpStatus = (port: number, path: string) => async (): Promise<number> => (await get(port, path)).status

type StreamHandler = (request: FastifyRequest, reply: FastifyReply) => unknown
const STREAM_HANDLERS: Record<string, (source: () => Readable) => StreamHandler> = {
  'a sync handler calling reply.send(stream) without return': (source) => (_request, reply) => { void reply.send(source()) },
  'return reply.send(stream)': (source) => (_request, reply) => reply.send(source()),
  'an async handler returning the stream': (source) => async () => source()
}
const SOURCES: Record<string, () => Readable> = {
  'a slow Readable': slowStream,
  'an 8 MB createReadStream file': () => createReadStream(bigFile)
}

// 1. The client closes mid-download, 10 times, under maxInFlight: 10.
for (const [sourceName, source] of Object.entries(SOURCES)) {
  for (const [handlerName, handler] of Object.entries(STREAM_HANDLERS)) {
    t.test(`HTTP/1.1, ${handlerName}, ${sourceName}: the client leaves mid-download, 10 times`, async (t) => {
      const app = await gated(t, { maxInFlight: 10, rateLimit: false })
      app.get('/download', handler(source))
      const hold = holdRoute(app)
      const port = await listen(app)
      for (let i = 0; i < 10; i++) await headersThenClose(port, '/download')
      await allBack(t, app, hold, 10, httpStatus(port, '/hold'))
    })
  }
}

// 2. HTTP/2: RST_STREAM (CANCEL) in the middle of a streamed body, 50 streams on one session.
function h2Status (session: ClientHttp2Session, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ':path': path })
    let status = 0
    stream.on('response', (headers) => { status = Number(headers[':status']) })
    stream.on('error', reject)
    stream.on('end', () => { resolve(status) })
    stream.resume()
    stream.end()
  })
}

function h2CancelMidBody (session: ClientHttp2Session, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ':path': path })
    stream.on('error', () => {})
    stream.once('data', () => { stream.close(h2.NGHTTP2_CANCEL); resolve() })
    stream.once('end', () => { reject(new Error('the body ended before it could be cancelled')) })
    stream.end()
  })
}

for (const [handlerName, handler] of Object.entries(STREAM_HANDLERS)) {
  t.test(`HTTP/2, ${handlerName}: 50 streams reset mid-body on one session`, async (t) => {
    const app = await gated(t, { maxInFlight: 50, rateLimit: false }, { http2: true })
    app.get('/download', handler(slowStream))
    const hold = holdRoute(app)
    const port = await listen(app)
    const session = connectH2(`http://127.0.0.1:${port}`)
    t.teardown(() => session.close())
    await Promise.all(Array.from({ length: 50 }, () => h2CancelMidBody(session, '/download')))
    await allBack(t, app, hold, 50, () => h2Status(session, '/hold'))
  })
}

// 3. Three pipelined requests on one socket, closed right after they were written.
t.test('HTTP/1.1 pipelining: the socket closes right after three requests', async (t) => {
  const sequences = [
    ['/stream', '/late', '/late'],
    ['/late', '/stream', '/late'],
    ['/late', '/late', '/late'],
    ['/stream', '/stream', '/stream']
  ]
  for (const sequence of sequences) {
    await t.test(sequence.join(' + '), async (t) => {
      const app = await gated(t, { maxInFlight: 3, rateLimit: false })
      let lateSent = 0
      let entered = 0
      app.get('/stream', (_request, reply) => { entered++; return reply.send(slowStream()) })
      app.get('/late', (_request, reply) => {
        entered++
        setTimeout(() => { lateSent++; void reply.send('late') }, 50)
        return reply
      })
      const hold = holdRoute(app)
      const port = await listen(app)
      const { socket } = await rawSocket(port)
      socket.on('error', () => {})
      // Closed as soon as the bytes are on their way.
      socket.write(sequence.map((path) => `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`).join(''), () => socket.destroy())
      const lates = sequence.filter((path) => path === '/late').length
      t.ok(await eventually(() => entered === 3 && lateSent === lates, 5000), `the three handlers ran and the ${lates} late sends happened`)
      await allBack(t, app, hold, 3, httpStatus(port, '/hold'))
    })
  }
})

// 4. handlerTimeout with a callback-style handler: the 503 is sent while the handler runs on; its
// permit must stay taken until the handler's late reply.send, so at most maxInFlight run at once.
t.test('handlerTimeout with a callback handler: the permit is held until the handler\'s late send', async (t) => {
  const where: Record<string, { route: Record<string, unknown>, server: Record<string, unknown> }> = {
    'route option handlerTimeout: 50': { route: { handlerTimeout: 50 }, server: {} },
    'server option handlerTimeout: 50': { route: {}, server: { handlerTimeout: 50 } }
  }
  for (const [name, { route, server }] of Object.entries(where)) {
    await t.test(name, async (t) => {
      const app = await gated(t, { maxInFlight: 5, rateLimit: false }, server)
      const finish = deferred()
      let running = 0
      let peak = 0
      let started = 0
      let peakInFlight = 0
      const sample = (): void => { peakInFlight = Math.max(peakInFlight, app.admission.stats().inFlight) }
      app.get('/work', route, (_request, reply) => {
        started++
        running++
        peak = Math.max(peak, running)
        sample()
        // Not async, returns undefined: its work ends with the late send.
        void finish.promise.then(() => { running--; void reply.send('late') })
      })
      const hold = holdRoute(app)
      const port = await listen(app)
      const answers: Array<{ status: number, retryAfter: unknown }> = []
      // Four waves of five, each answered before the next is sent: 20 requests while the first
      // five handlers still run (their 503s come from the handler timeout).
      for (let wave = 0; wave < 4; wave++) {
        const got = await Promise.all(Array.from({ length: 5 }, () => get(port, '/work')))
        for (const a of got) answers.push({ status: a.status, retryAfter: a.headers['retry-after'] })
        sample()
      }
      t.equal(started, 5, `only maxInFlight handlers started (started ${started})`)
      t.ok(peak <= 5, `at most 5 handlers ran at once (peak ${peak})`)
      t.ok(peakInFlight <= 5, `inFlight never exceeded 5 (peak ${peakInFlight})`)
      t.equal(app.admission.stats().inFlight, 5, 'the five running handlers hold their permits after their 503s')
      t.ok(answers.every((a) => a.status === 503), 'every request is answered 503')
      t.equal(answers.filter((a) => a.retryAfter === '1').length, 15, 'the 15 sent while the handlers ran are shed by the in-flight gate (Retry-After: 1)')
      t.match(app.admission.stats(), { admitted: 5, shed: 15 })
      finish.resolve()
      t.ok(await eventually(() => running === 0), 'the handlers finished')
      t.ok(await eventually(() => app.admission.stats().inFlight === 0, BACK_WITHIN_MS), `then the permits came back (inFlight ${app.admission.stats().inFlight})`)
      t.equal((await get(port, '/work')).status, 200, 'a new request is admitted (and answered before its timeout)')
      await allBack(t, app, hold, 5, httpStatus(port, '/hold'))
    })
  }
})

// 5. Login throttling: a hijacked attempt whose client left must end, not count as in flight for good.
t.test('login throttling: hijacked attempts whose clients left end; later attempts are not refused for them', async (t) => {
  const app = await gated(t, { maxInFlight: 10, rateLimit: false })
  let hijacked = 0
  app.get('/login', { config: { admission: { count: 'failures', rateLimit: { limit: 5, windowMs: 60_000 } } } }, async (request, reply) => {
    if ((request.query as { hang?: string }).hang !== undefined) {
      hijacked++
      // The application takes the socket over and never answers.
      reply.hijack()
      return
    }
    return { ok: true }
  })
  const hold = holdRoute(app)
  const port = await listen(app)
  // As many dead attempts as the quota holds: if they stayed in flight, every attempt would be
  // refused with Retry-After: 1 for good.
  for (let i = 0; i < 5; i++) {
    const entered = hijacked + 1
    await getThenAbort(port, '/login?hang=1', (async () => { await eventually(() => hijacked === entered, 5000) })())
  }
  t.equal(hijacked, 5, 'five attempts were hijacked, their clients gone')
  t.ok(await eventually(() => app.admission.stats().inFlight === 0, BACK_WITHIN_MS), `their permits are back (inFlight ${app.admission.stats().inFlight})`)
  const later = []
  for (let i = 0; i < 5; i++) later.push(await get(port, '/login'))
  const refusedForTheDead = later.filter((a) => a.status === 429 && a.headers['retry-after'] === '1').length
  t.equal(refusedForTheDead, 0, `no attempt is refused with 429, Retry-After: 1 for the dead ones (${refusedForTheDead} were)`)
  // A hijacked attempt sent no failed response: it counts as nothing (README, Login throttling).
  t.same(later.map((a) => a.status), [200, 200, 200, 200, 200], 'successful attempts from the same client are admitted')
  await allBack(t, app, hold, 10, httpStatus(port, '/hold'))
})

// 6. Leaks add up: 80 of them under maxInFlight: 100 left room for 20.
t.test('aggregate: after 80 would-be leaks under maxInFlight 100, 100 concurrent requests are all admitted', async (t) => {
  const app = await gated(t, { maxInFlight: 100, rateLimit: false })
  let lateSent = 0
  app.get('/download', (_request, reply) => { void reply.send(slowStream()) })
  app.get('/late', (_request, reply) => {
    setTimeout(() => { lateSent++; void reply.send('late') }, 50)
    return reply
  })
  const hold = holdRoute(app)
  const port = await listen(app)
  // 60 clients leaving mid-download, ten at a time...
  for (let batch = 0; batch < 6; batch++) {
    await Promise.all(Array.from({ length: 10 }, () => headersThenClose(port, '/download')))
  }
  // ...and 10 sockets of three pipelined late answers, each closed at once (20 of the 30 leaked).
  for (let i = 0; i < 10; i++) {
    const { socket } = await rawSocket(port)
    socket.on('error', () => {})
    socket.write('GET /late HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(3), () => socket.destroy())
  }
  t.ok(await eventually(() => lateSent === 30, 5000), 'the 30 late sends happened')
  await allBack(t, app, hold, 100, httpStatus(port, '/hold'))
})

// The counterpart that must keep working: a client that leaves while an async handler runs
// does not give the permit back before the handler's promise settles.
t.test('counterpart: the client leaves while an async handler runs; the permit waits for the handler', async (t) => {
  const cases: Record<string, (work: Promise<void>) => StreamHandler> = {
    'returning a value': (work) => async () => { await work; return 'late' },
    'returning a stream': (work) => async () => { await work; return slowStream() }
    // A handler that returned the reply with no promise is not followed once its client left
    // (a proxy's way, whose send never comes): test/gate/release.test.ts.
  }
  for (const [name, make] of Object.entries(cases)) {
    await t.test(name, async (t) => {
      const app = await gated(t, { maxInFlight: 1, rateLimit: false })
      const work = deferred()
      const entered = deferred()
      const aborted = deferred()
      let ended = false
      app.addHook('onRequestAbort', async (_request) => { aborted.resolve() })
      const handler = make(work.promise.then(() => { ended = true }))
      app.get('/slow', (request, reply) => { entered.resolve(); return handler(request, reply) })
      app.get('/other', async () => 'other')
      const port = await listen(app)
      await getThenAbort(port, '/slow', entered.promise)
      await aborted.promise
      await sleep(20)
      t.equal(app.admission.stats().inFlight, 1, 'held while the handler runs, though the client is gone')
      t.equal((await get(port, '/other')).status, 503, 'so the gate is still full')
      work.resolve()
      t.ok(await eventually(() => ended && app.admission.stats().inFlight === 0, BACK_WITHIN_MS), 'given back once the handler\'s work ended')
      t.equal((await get(port, '/other')).status, 200)
      t.equal(app.admission.stats().inFlight, 0, 'once: never below zero, never an extra slot')
    })
  }
})
