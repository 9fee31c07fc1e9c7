// Pipelined requests on a socket that closes: Node never finishes their queued responses (no
// `finish`, no `close`, so no `onResponse`), but each request reports the abort — the permit must
// come back for every one, whenever the socket closes. Raw sockets: the wire is the point.
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import admission from '../../lib/index.js'
import { deferred, eventually, get, listen, sleep, type Teardown } from '../helpers/http.js'
import { rawSocket, statuses } from '../helpers/raw.js'

interface Server { app: FastifyInstance, port: number, release: () => void, entered: Promise<void> }

async function server (t: Teardown): Promise<Server> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { maxInFlight: 8, rateLimit: false })
  let hold = deferred()
  let entered = deferred()
  const route = { config: { admission: { maxInFlight: 2 } } }
  app.get('/slow', route, async () => { entered.resolve(); await hold.promise; return 'slow' })
  app.get('/fast', route, async () => 'fast')
  app.post('/echo', route, async (request) => request.body)
  const port = await listen(app)
  const s: Server = {
    app,
    port,
    release: () => { hold.resolve(); hold = deferred(); entered = deferred() },
    get entered () { return entered.promise }
  }
  return s
}

const GET = (path: string): string => `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`
const POST = (body: string): string => `POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`

async function allBack (t: Test, s: Server): Promise<void> {
  t.ok(await eventually(() => s.app.admission.stats().inFlight === 0), 'every permit is back')
  const route = s.app.admission.stats().routes
  t.equal(route['GET /slow']!.inFlight + route['GET /fast']!.inFlight + route['POST /echo']!.inFlight, 0, 'on every route')
  // The route allows 2 at once: leaked permits would shed these.
  const answers = await Promise.all([get(s.port, '/fast'), get(s.port, '/fast')])
  t.equal(answers.map((a) => a.status).join(), '200,200', 'the route still admits its two')
}

t.test('closed before any response: slow, fast, fast', async (t) => {
  const s = await server(t)
  const { socket } = await rawSocket(s.port)
  socket.write(GET('/slow') + GET('/fast') + GET('/fast'))
  await s.entered
  await sleep(20)
  socket.destroy()
  await sleep(20)
  s.release()
  await allBack(t, s)
})

t.test('closed while the first response is held, the others queued behind it', async (t) => {
  const s = await server(t)
  const { socket, received } = await rawSocket(s.port)
  socket.write(GET('/slow') + GET('/fast') + GET('/fast') + GET('/fast'))
  await s.entered
  await sleep(20)
  s.release()
  await eventually(() => statuses(received()).length >= 1)
  socket.destroy()
  await allBack(t, s)
})

t.test('closed after the first response came, the second held, the third queued', async (t) => {
  const s = await server(t)
  const { socket, received } = await rawSocket(s.port)
  socket.write(GET('/fast') + GET('/slow') + GET('/fast'))
  await s.entered
  t.ok(await eventually(() => statuses(received()).length === 1), 'the first answered')
  socket.destroy()
  await sleep(20)
  s.release()
  await allBack(t, s)
})

t.test('pipelined POSTs with bodies, closed before the answers', async (t) => {
  const s = await server(t)
  const { socket } = await rawSocket(s.port)
  socket.write(GET('/slow') + POST('{"a":1}') + POST('{"b":2}'))
  await s.entered
  await sleep(20)
  socket.destroy()
  s.release()
  await allBack(t, s)
})

t.test('a body cut mid-way', async (t) => {
  const s = await server(t)
  const { socket } = await rawSocket(s.port)
  socket.write('POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":')
  await eventually(() => s.app.admission.stats().inFlight === 1)
  t.equal(s.app.admission.stats().inFlight, 1, 'held while the body comes')
  socket.destroy()
  await allBack(t, s)
})

t.test('a body cut mid-way behind a held pipelined request', async (t) => {
  const s = await server(t)
  const { socket } = await rawSocket(s.port)
  socket.write(GET('/slow') + 'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":')
  await s.entered
  await sleep(20)
  socket.destroy()
  s.release()
  await allBack(t, s)
})

t.test('HTTP/1.0 keep-alive, pipelined, closed early', async (t) => {
  const s = await server(t)
  const { socket } = await rawSocket(s.port)
  const get10 = (path: string): string => `GET ${path} HTTP/1.0\r\nConnection: keep-alive\r\n\r\n`
  socket.write(get10('/slow') + get10('/fast') + get10('/fast'))
  await s.entered
  await sleep(20)
  socket.destroy()
  s.release()
  await allBack(t, s)
})

t.test('all answered when nobody closes: each response releases once (no double release)', async (t) => {
  const s = await server(t)
  const { socket, received } = await rawSocket(s.port)
  socket.write(GET('/fast') + GET('/fast') + POST('{"c":3}') + GET('/fast'))
  t.ok(await eventually(() => statuses(received()).length === 4))
  t.same(statuses(received()), [200, 200, 200, 200])
  t.equal(s.app.admission.stats().admitted, 4)
  socket.destroy()
  await allBack(t, s)
})

t.test('a request gated after its connection closed (pipelined, read before the client left) gives its permit back', async (t) => {
  // Regression (issue 33, item 16): on a busy machine a pipelined request can reach the gate after
  // its socket closed; its permit went onto a connection list already walked (or one whose `close`
  // was past), and with `return reply` and a late send, it was held for good. Here an onRequest
  // hook of the application holds every request after the first until the socket has closed.
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { maxInFlight: 10, rateLimit: false })
  let first = true
  app.addHook('onRequest', async (request) => {
    if (request.url !== '/') return
    if (first) {
      first = false
      return
    }
    const socket = request.raw.socket
    if (!socket.destroyed) await new Promise((resolve) => socket.once('close', resolve))
    await new Promise((resolve) => setImmediate(resolve))
  })
  const sends: Array<Promise<unknown>> = []
  app.get('/', (_request, reply) => {
    sends.push(new Promise((resolve) => setTimeout(resolve, 20)).then(() => reply.send('late')))
    return reply
  })
  app.get('/next', async () => 'ok')
  const port = await listen(app)
  const { socket } = await rawSocket(port)
  socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(3))
  await eventually(() => app.admission.stats().inFlight >= 1)
  socket.destroy()
  t.ok(await eventually(() => sends.length === 3 && app.admission.stats().inFlight === 0, 2000), 'every permit back')
  await Promise.all(sends)
  t.equal(app.admission.stats().inFlight, 0, 'and none given back twice')
  t.equal((await get(port, '/next')).status, 200)
})

t.test('the first request of a connection, gated after the connection closed, gives its permit back', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { maxInFlight: 10, rateLimit: false })
  app.addHook('onRequest', async (request) => {
    if (request.url !== '/') return
    const socket = request.raw.socket
    if (!socket.destroyed) await new Promise((resolve) => socket.once('close', resolve))
    await new Promise((resolve) => setImmediate(resolve))
  })
  let late: Promise<unknown> | undefined
  app.get('/', (_request, reply) => {
    late = new Promise((resolve) => setTimeout(resolve, 20)).then(() => reply.send('late'))
    return reply
  })
  const port = await listen(app)
  const { socket } = await rawSocket(port)
  socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n')
  await sleep(30)
  socket.destroy()
  t.ok(await eventually(() => late !== undefined && app.admission.stats().inFlight === 0, 2000), 'the permit is back')
  await late
  t.equal(app.admission.stats().inFlight, 0, 'once')
})
