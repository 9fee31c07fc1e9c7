// Long-lived connections behind the gate, with the real plugins apps combine it with, on real
// sockets: a websocket or an event stream gives its in-flight permit back when its long-lived
// phase begins, so open streams never starve the API, and the adaptive limit never reads a
// stream's life as latency; a proxied request whose client left holds nothing.
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import websocket from '@fastify/websocket'
import { fastifySSE as sse } from '@fastify/sse'
import replyFrom from '@fastify/reply-from'
import httpProxy from '@fastify/http-proxy'
import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http'
import { Readable } from 'node:stream'
import WebSocket from 'ws'
import admission from '../../lib/index.js'
import type { AdmissionOptions } from '../../lib/index.js'
import { deferred, eventually, get, listen, sleep } from '../helpers/http.js'

const STREAMS = 20
const GETS = 40

/** Both ways an application bounds its in-flight requests. */
const LIMITS: ReadonlyArray<[string, AdmissionOptions['maxInFlight']]> = [['maxInFlight: 8', 8], ["maxInFlight: 'auto'", 'auto']]

async function gated (t: Test, options: AdmissionOptions, before?: (app: FastifyInstance) => Promise<void>): Promise<FastifyInstance> {
  const app = Fastify()
  t.teardown(() => app.close())
  if (before !== undefined) await before(app)
  await app.register(admission, { rateLimit: false, ...options })
  app.get('/api', async () => ({ ok: true }))
  return app
}

/** Opens a websocket; resolves with it once open, or with the status of the refused upgrade. */
function openSocket (port: number, path: string): Promise<{ socket?: WebSocket, status?: number, retryAfter?: string }> {
  return new Promise((resolve) => {
    const socket = new WebSocket(`ws://127.0.0.1:${port}${path}`)
    socket.on('open', () => { resolve({ socket }) })
    socket.on('unexpected-response', (_request, response) => {
      response.resume()
      resolve({ status: response.statusCode, retryAfter: response.headers['retry-after'] as string | undefined })
      socket.terminate()
    })
    socket.on('error', () => { /* a refused upgrade ends here too */ })
  })
}

/** Opens a stream: resolves once its headers arrived, with the request to destroy it by. */
function openStream (port: number, path: string): Promise<{ request: ClientRequest, response: IncomingMessage }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest({ host: '127.0.0.1', port, path, agent: false, headers: { accept: 'text/event-stream' } }, (response) => {
      response.on('data', () => {})
      response.on('error', () => {})
      resolve({ request, response })
    })
    request.on('error', (error) => { if (!request.destroyed) reject(error) })
    request.end()
  })
}

/**
 * Whether every GET was served but those 'auto' shed for the machine's own queueing delay (its
 * queueDelay signal, which a busy test machine may trip): none was shed by an in-flight limit.
 */
function allServed (t: Test, app: FastifyInstance, served: number): void {
  const stats = app.admission.stats()
  const forDelay = stats.pressure === undefined ? 0 : Object.values(stats.pressure.shed).reduce((sum, n) => sum + n, 0)
  t.equal(served + forDelay, GETS, `every GET served (${forDelay} shed for queueing delay on this machine)`)
  t.equal(stats.shed, forDelay, 'none shed by an in-flight limit')
}

/** `count` GETs, a few at a time (an application's traffic, not a burst), and how many were served. */
async function servedOf (port: number, count: number, atOnce = 4): Promise<number> {
  let served = 0
  for (let sent = 0; sent < count; sent += atOnce) {
    const answers = await Promise.all(Array.from({ length: Math.min(atOnce, count - sent) }, () => get(port, '/api')))
    served += answers.filter((answer) => answer.status === 200).length
  }
  return served
}

/** An event stream the application writes itself, its handler awaiting the end. */
function rawStreamRoute (app: FastifyInstance, config: Record<string, unknown> = {}): void {
  app.get('/events', { config }, async (request, reply) => {
    reply.raw.writeHead(200, { 'content-type': 'text/event-stream' })
    reply.raw.write('data: hello\n\n')
    await new Promise<void>((resolve) => { request.raw.on('close', resolve) })
  })
}

const STREAM_KINDS: Record<string, { before?: (app: FastifyInstance) => Promise<void>, route: (app: FastifyInstance) => void }> = {
  'reply.raw writes, the async handler awaiting the end': { route: (app) => { rawStreamRoute(app) } },
  'reply.send(Readable) left open': {
    route: (app) => {
      app.get('/events', (_request, reply) => {
        const stream = new Readable({ read () {} })
        stream.push('data: hello\n\n')
        reply.type('text/event-stream').send(stream)
        return reply
      })
    }
  },
  '@fastify/sse': {
    before: async (app) => { await app.register(sse) },
    route: (app) => {
      app.get('/events', { sse: true }, async (_request, reply) => {
        reply.sse.keepAlive()
        await reply.sse.send({ data: 'hello' })
      })
    }
  }
}

t.test('20 open websockets leave 40 of 40 GETs served, and nothing in flight once they close', async (t) => {
  for (const [name, maxInFlight] of LIMITS) {
    await t.test(name, async (t) => {
      const app = await gated(t, { maxInFlight }, async (app) => { await app.register(websocket) })
      app.get('/ws', { websocket: true }, (socket) => { socket.on('message', (message: Buffer) => { socket.send(message) }) })
      const port = await listen(app)
      const opened = await Promise.all(Array.from({ length: STREAMS }, () => openSocket(port, '/ws')))
      const sockets = opened.map((one) => one.socket).filter((socket) => socket !== undefined)
      t.equal(sockets.length, STREAMS, 'every upgrade accepted')
      t.equal(app.admission.stats().inFlight, 0, 'no in-flight permit held by an open websocket')
      t.equal(app.admission.stats().longLived, STREAMS, 'counted as long-lived')
      allServed(t, app, await servedOf(port, GETS))
      const echoed = await new Promise((resolve) => { sockets[0]!.once('message', (data) => { resolve(String(data)) }); sockets[0]!.send('ping') })
      t.equal(echoed, 'ping', 'the websockets work')
      for (const socket of sockets) socket.close()
      t.ok(await eventually(() => app.admission.stats().longLived === 0), 'long-lived count back to 0 once they close')
      t.equal(app.admission.stats().inFlight, 0)
      t.equal(app.admission.stats().routes['GET /ws']!.longLived, 0)
    })
  }
})

t.test('20 open event streams leave 40 of 40 GETs served, and nothing in flight once they close', async (t) => {
  for (const [kind, { before, route }] of Object.entries(STREAM_KINDS)) {
    for (const [name, maxInFlight] of LIMITS) {
      await t.test(`${kind}, ${name}`, async (t) => {
        const app = await gated(t, { maxInFlight }, before)
        route(app)
        const port = await listen(app)
        const streams = await Promise.all(Array.from({ length: STREAMS }, () => openStream(port, '/events')))
        t.ok(streams.every((one) => String(one.response.headers['content-type']).startsWith('text/event-stream')))
        t.ok(await eventually(() => app.admission.stats().inFlight === 0), 'no in-flight permit held by an open stream')
        t.equal(app.admission.stats().longLived, STREAMS)
        allServed(t, app, await servedOf(port, GETS))
        for (const one of streams) one.request.destroy()
        t.ok(await eventually(() => app.admission.stats().longLived === 0), 'long-lived count back to 0 once they close')
        t.equal(app.admission.stats().inFlight, 0)
      })
    }
  }
})

t.test('upgrades stay rate-limited as requests: a route quota of 5 takes 5, refuses 3 with 429 and Retry-After', async (t) => {
  const app = await gated(t, { maxInFlight: 8 }, async (app) => { await app.register(websocket) })
  app.get('/ws', { websocket: true, config: { admission: { rateLimit: { limit: 5, windowMs: 60_000 } } } }, () => {})
  const port = await listen(app)
  const opened = []
  for (let i = 0; i < 8; i++) opened.push(await openSocket(port, '/ws'))
  t.equal(opened.filter((one) => one.socket !== undefined).length, 5, '5 accepted')
  const refused = opened.filter((one) => one.status !== undefined)
  t.equal(refused.length, 3, '3 refused')
  for (const one of refused) {
    t.equal(one.status, 429)
    t.ok(Number(one.retryAfter) >= 1, 'with Retry-After')
  }
  for (const one of opened) one.socket?.close()
  t.ok(await eventually(() => app.admission.stats().longLived === 0 && app.admission.stats().inFlight === 0))
})

t.test('maxLongLived bounds long-lived connections apart from maxInFlight, each with its own 503', async (t) => {
  const app = await gated(t, { maxInFlight: 2, maxLongLived: 3 }, async (app) => { await app.register(websocket) })
  app.get('/ws', { websocket: true }, () => {})
  app.get('/one', { websocket: true, config: { admission: { maxLongLived: 1 } } }, () => {})
  const port = await listen(app)
  const first = await Promise.all([openSocket(port, '/ws'), openSocket(port, '/ws'), openSocket(port, '/ws')])
  t.equal(first.filter((one) => one.socket !== undefined).length, 3, 'three open, beyond maxInFlight: 2')
  const fourth = await openSocket(port, '/ws')
  t.equal(fourth.status, 503, 'the fourth refused: maxLongLived')
  t.equal(fourth.retryAfter, '1')
  t.equal((await get(port, '/api')).status, 200, 'the API is served')
  const problem = await get(port, '/one', { upgrade: 'websocket', connection: 'upgrade' })
  t.equal(problem.status, 503, 'a plain request is refused the same way while the long-lived places are full')
  t.match(problem.headers['ratelimit-policy'], /^"long-lived";q=3;qu="concurrent-requests"$/)
  first[0]!.socket!.close()
  t.ok(await eventually(() => app.admission.stats().longLived === 2))
  const own = await openSocket(port, '/one')
  t.ok(own.socket !== undefined, 'the route takes its one place')
  const beyond = await get(port, '/one', { upgrade: 'websocket', connection: 'upgrade' })
  t.equal(beyond.status, 503, "beyond the route's own bound")
  t.match(beyond.headers['ratelimit-policy'], /^"route-long-lived";q=1;qu="concurrent-requests"$/)
  t.equal(app.admission.stats().routes['GET /one']!.shed, 2, 'both refusals counted on the route')
  for (const one of [...first, own]) one.socket?.close()
  t.ok(await eventually(() => app.admission.stats().longLived === 0))
})

t.test('a plain request to a websocket route is an ordinary request', async (t) => {
  const app = await gated(t, { maxInFlight: 1, maxLongLived: 1 }, async (app) => { await app.register(websocket) })
  app.route({ method: 'GET', url: '/both', handler: async () => 'plain', wsHandler: (socket) => { socket.close() } })
  const port = await listen(app)
  const answer = await get(port, '/both')
  t.equal(answer.status, 200)
  t.equal(answer.body, 'plain')
  t.equal(app.admission.stats().longLived, 0, 'never counted as long-lived')
})

t.test('not enforcing: a full set of long-lived places is only counted', async (t) => {
  const app = await gated(t, { maxLongLived: 1, enforce: false }, async (app) => { await app.register(websocket) })
  app.get('/ws', { websocket: true }, () => {})
  const port = await listen(app)
  const both = [await openSocket(port, '/ws'), await openSocket(port, '/ws')]
  t.ok(both.every((one) => one.socket !== undefined), 'both upgraded')
  t.equal(app.admission.stats().wouldShed, 1)
  t.equal(app.admission.stats().longLived, 1, 'the second holds no place')
  for (const one of both) one.socket?.close()
  t.ok(await eventually(() => app.admission.stats().longLived === 0))
})

t.test('a route marked longLived gives its permit back at its headers; false keeps it to the end', async (t) => {
  const app = await gated(t, { maxInFlight: 1 })
  const slowBody = (): Readable => new Readable({ read () {} })
  const bodies: Readable[] = []
  app.get('/download', { config: { admission: { longLived: true } } }, (_request, reply) => {
    const body = slowBody()
    bodies.push(body)
    body.push('x')
    return reply.type('application/octet-stream').send(body)
  })
  app.get('/kept', { config: { admission: { longLived: false } } }, async (request, reply) => {
    reply.raw.writeHead(200, { 'content-type': 'text/event-stream' })
    reply.raw.write('data: x\n\n')
    await new Promise<void>((resolve) => { request.raw.on('close', resolve) })
  })
  app.get('/refused-download', { config: { admission: { longLived: true } } }, async (_request, reply) => reply.code(404).send({ no: 1 }))
  const port = await listen(app)
  const download = await openStream(port, '/download')
  t.ok(await eventually(() => app.admission.stats().inFlight === 0), 'the download holds no in-flight permit')
  t.equal(app.admission.stats().longLived, 1)
  t.equal((await get(port, '/api')).status, 200)
  download.request.destroy()
  t.ok(await eventually(() => app.admission.stats().longLived === 0))
  t.equal((await get(port, '/refused-download')).status, 404)
  t.equal(app.admission.stats().longLived, 0, 'an answer of 300 or more is no long-lived reply')
  const kept = await openStream(port, '/kept')
  await sleep(20)
  t.equal(app.admission.stats().inFlight, 1, 'longLived: false holds the permit for the stream')
  t.equal((await get(port, '/api')).status, 503)
  kept.request.destroy()
  t.ok(await eventually(() => app.admission.stats().inFlight === 0))
  for (const body of bodies) body.destroy()
})

t.test('a client that leaves while an event stream handler awaits, before its headers: nothing stays counted', async (t) => {
  const app = await gated(t, { maxInFlight: 2 })
  const entered = deferred()
  const go = deferred()
  app.get('/events', { config: { admission: { longLived: true } } }, async (_request, reply) => {
    entered.resolve()
    await go.promise
    reply.raw.writeHead(200, { 'content-type': 'text/event-stream' })
    reply.raw.write('data: late\n\n')
  })
  const port = await listen(app)
  const request = httpRequest({ host: '127.0.0.1', port, path: '/events', agent: false })
  request.on('error', () => {})
  request.end()
  await entered.promise
  request.destroy()
  await sleep(50)
  t.equal(app.admission.stats().inFlight, 1, 'held while the handler works')
  go.resolve()
  t.ok(await eventually(() => app.admission.stats().inFlight === 0 && app.admission.stats().longLived === 0), 'then nothing held or counted')
})

t.test('over HTTP/2: an event stream found when its handler returns gives its permit back', async (t) => {
  const { connect } = await import('node:http2')
  const app = Fastify({ http2: true })
  t.teardown(() => app.close())
  await app.register(admission, { maxInFlight: 1, rateLimit: false })
  rawStreamRoute(app as unknown as FastifyInstance)
  app.get('/api', async () => 'ok')
  const port = await listen(app as unknown as FastifyInstance)
  const session = connect(`http://127.0.0.1:${port}`)
  t.teardown(() => session.destroy())
  const stream = session.request({ ':path': '/events' })
  await new Promise((resolve) => stream.once('response', resolve))
  t.ok(await eventually(() => app.admission.stats().inFlight === 0))
  t.equal(app.admission.stats().longLived, 1)
  const api = session.request({ ':path': '/api' })
  const status = await new Promise((resolve) => api.once('response', (headers) => { resolve(headers[':status']) }))
  api.resume()
  t.equal(status, 200)
  stream.close()
  t.ok(await eventually(() => app.admission.stats().longLived === 0))
})

t.test("the adaptive limit learns from work, not from streams' lifetimes", async (t) => {
  const rounds = 3
  const lifeMs = 400
  // 'auto' without its queue-delay half: a slow machine's loop would shed some of the burst below,
  // which says nothing of the limit the streams left.
  const withStreams = await gated(t, { maxInFlight: 'auto', queueDelay: false })
  rawStreamRoute(withStreams)
  const control = await gated(t, { maxInFlight: 'auto', queueDelay: false })
  const streamPort = await listen(withStreams)
  const before = withStreams.admission.limit
  for (let round = 0; round < rounds; round++) {
    const streams = await Promise.all(Array.from({ length: STREAMS }, () => openStream(streamPort, '/events')))
    await sleep(lifeMs)
    for (const one of streams) one.request.destroy()
    t.ok(await eventually(() => withStreams.admission.stats().longLived === 0))
  }
  t.equal(withStreams.admission.limit, before, 'no stream was taken for a latency sample')
  t.equal(withStreams.admission.limit, control.admission.limit, 'the limit is the control\'s')
  // A burst afterwards: the limit the streams left (the initial one; half of it before) admits at
  // least that many of the burst, however slow the machine (a limit only moves as requests complete).
  const burst = 30
  const served = await servedOf(streamPort, burst, burst)
  t.ok(served >= Math.min(burst, before as number), `a burst of ${burst}: ${served} served, at least the limit of ${String(before)}`)
})

/** An upstream whose answer takes 200 ms, and a gated proxy in front of it. */
async function proxied (t: Test, wire: (app: FastifyInstance, base: string) => Promise<void>): Promise<{ app: FastifyInstance, port: number }> {
  const upstream = Fastify()
  t.teardown(() => upstream.close())
  upstream.get('/slow', async () => { await sleep(200); return 'upstream' })
  upstream.get('/api', async () => 'upstream api')
  const base = `http://127.0.0.1:${await listen(upstream)}`
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { maxInFlight: 8, rateLimit: false })
  await wire(app, base)
  return { app, port: await listen(app) }
}

async function abortAfter (port: number, path: string, ms: number): Promise<void> {
  const request = httpRequest({ host: '127.0.0.1', port, path, agent: false })
  request.on('error', () => {})
  request.end()
  await sleep(ms)
  request.destroy()
}

const PROXIES: Record<string, (app: FastifyInstance, base: string) => Promise<void>> = {
  '@fastify/reply-from': async (app, base) => {
    await app.register(replyFrom, { base })
    app.get('/slow', (_request, reply) => reply.from('/slow'))
    app.get('/api', (_request, reply) => reply.from('/api'))
  },
  '@fastify/http-proxy': async (app, base) => { await app.register(httpProxy, { upstream: base }) }
}

t.test('8 proxied requests whose clients abort leave no permit held, and the next request is served', async (t) => {
  for (const [name, wire] of Object.entries(PROXIES)) {
    await t.test(name, async (t) => {
      const { app, port } = await proxied(t, wire)
      await Promise.all(Array.from({ length: 8 }, () => abortAfter(port, '/slow', 50)))
      t.ok(await eventually(() => app.admission.stats().inFlight === 0, 1000), '0 permits within a second')
      const next = await get(port, '/api')
      t.equal(next.status, 200)
      t.equal(next.body, 'upstream api')
    })
  }
})

t.test('stats() shows the age of the oldest permit per route; one held past permitWarningMs is logged once', async (t) => {
  const lines: Array<{ level: number, msg: string, route?: string }> = []
  const app = Fastify({ logger: { level: 'warn', stream: { write: (line: string) => { lines.push(JSON.parse(line)) } } } })
  t.teardown(() => app.close())
  await app.register(admission, { maxInFlight: 4, rateLimit: false, permitWarningMs: 40 })
  const go = deferred()
  app.get('/slow', async () => { await go.promise; return 'late' })
  app.get('/api', async () => 'ok')
  const port = await listen(app)
  const first = get(port, '/slow')
  t.ok(await eventually(() => app.admission.stats().inFlight === 1))
  const second = get(port, '/slow')
  t.ok(await eventually(() => app.admission.stats().inFlight === 2))
  await sleep(150)
  const route = app.admission.stats().routes['GET /slow']!
  t.ok(route.oldestPermitMs >= 150, `the oldest permit is ${route.oldestPermitMs} ms old`)
  t.equal(app.admission.stats().routes['GET /api']!.oldestPermitMs, 0, 'none held on another route')
  const warned = lines.filter((line) => line.route === 'GET /slow')
  t.equal(warned.length, 2, 'each permit logged once, though the sweep ran many times')
  t.match(warned[0]!.msg, /GET \/slow has held its in-flight permit for \d+ ms \(permitWarningMs: 40\).*longLived: true/)
  go.resolve()
  await Promise.all([first, second])
  t.ok(await eventually(() => app.admission.stats().routes['GET /slow']!.oldestPermitMs === 0))
})

t.test('permitWarningMs: false runs no sweep', async (t) => {
  const lines: string[] = []
  const app = Fastify({ logger: { level: 'warn', stream: { write: (line: string) => { lines.push(line) } } } })
  t.teardown(() => app.close())
  await app.register(admission, { maxInFlight: 4, rateLimit: false, permitWarningMs: false })
  const go = deferred()
  app.get('/slow', async () => { await go.promise; return 'late' })
  const port = await listen(app)
  const slow = get(port, '/slow')
  await sleep(60)
  go.resolve()
  await slow
  t.same(lines, [])
})

t.test('bad long-lived options are refused with the option named', async (t) => {
  for (const [options, path] of [[{ maxLongLived: 0 }, 'maxLongLived'], [{ maxLongLived: 1.5 }, 'maxLongLived'], [{ permitWarningMs: -1 }, 'permitWarningMs'], [{ permitWarningMs: 'soon' }, 'permitWarningMs']] as const) {
    const app = Fastify()
    await t.rejects(async () => { await app.register(admission, options as AdmissionOptions).ready() }, { code: 'ADMISSION_INVALID_OPTION', path })
    await app.close()
  }
  for (const [config, path] of [[{ longLived: 'yes' }, 'longLived'], [{ maxLongLived: 2 }, 'maxLongLived'], [{ longLived: true, maxLongLived: 0 }, 'maxLongLived']] as const) {
    const app = Fastify()
    await app.register(admission)
    app.get('/x', { config: { admission: config as never } }, async () => 'x')
    await t.rejects(async () => { await app.ready() }, { code: 'ADMISSION_INVALID_OPTION', path: `config.admission of GET /x.${path}` })
    await app.close()
  }
})
