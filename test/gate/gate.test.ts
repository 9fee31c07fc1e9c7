import t from 'tap'
import Fastify from 'fastify'
import { connect } from 'node:net'
import admission, { memoryBackend } from '../../lib/index.js'
import { deferred, eventually, get, listen } from '../helpers/http.js'

t.test('shed, then limit: a shed request takes no token', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { maxInFlight: 1, rateLimit: { limit: 2, windowMs: 60_000 } })
  const hold = deferred()
  const entered = deferred()
  app.get('/slow', async () => { entered.resolve(); await hold.promise; return 'slow' })
  app.get('/', async () => 'ok')
  const port = await listen(app)
  const slow = get(port, '/slow')
  await entered.promise
  for (let i = 0; i < 5; i++) {
    const shed = await get(port, '/')
    t.equal(shed.status, 503)
    t.equal(shed.headers['retry-after'], '1')
    // The full gate's own quota, none left; no "default" item: the limiter was not consulted.
    t.equal(shed.headers.ratelimit, '"in-flight";r=0', 'the limiter was not consulted')
  }
  hold.resolve()
  await slow
  await eventually(() => app.admission.stats().inFlight === 0)
  // The slow request took one token of two; the five shed ones took none.
  t.equal((await get(port, '/')).status, 200)
  t.equal((await get(port, '/')).status, 429)
  const stats = app.admission.stats()
  t.match(stats, { admitted: 2, limited: 1, shed: 5, inFlight: 0, identities: 1 })
})

t.test('429 with an honest Retry-After, RateLimit headers and a JSON body', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  // A clock that stands still: the headers' t= are exact whatever the machine's speed.
  await app.register(admission, { backend: memoryBackend({ clock: () => 1_700_000_000_000 }), rateLimit: { limit: 100, windowMs: 60_000, burst: 20 } })
  app.get('/', async () => 'ok')
  for (let i = 0; i < 20; i++) {
    const res = await app.inject('/')
    t.equal(res.statusCode, 200)
    // q is the capacity (the burst), w the seconds it takes to come back: 20 at 100 a minute.
    t.equal(res.headers['ratelimit-policy'], '"default";q=20;w=12')
    // t: the next token, 600 ms away however many were spent (full again in (i + 1) × 600 ms).
    t.equal(res.headers.ratelimit, `"default";r=${19 - i};t=1`)
  }
  const refused = await app.inject('/')
  t.equal(refused.statusCode, 429)
  t.equal(refused.headers['retry-after'], '1', '600 ms rounded up')
  t.equal(refused.headers.ratelimit, '"default";r=0;t=1', 'the next token in 600 ms (12 s to full)')
  t.same(refused.json(), { statusCode: 429, error: 'Too Many Requests', message: 'Rate limit exceeded, retry in 1 second' })
})

t.test("refusal.limitStatusCode 503 with the text body is the seed's v1 wire format, byte for byte", async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: { limit: 1, windowMs: 5_000 }, refusal: { body: 'text', limitStatusCode: 503 }, headers: false })
  app.get('/', async () => 'ok')
  const port = await listen(app)
  t.equal((await get(port, '/')).status, 200)
  const raw = await new Promise<string>((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => { socket.end('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n') })
    let text = ''
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => { text += chunk })
    socket.on('end', () => { resolve(text) })
    socket.on('error', reject)
  })
  const [head, body] = raw.split('\r\n\r\n') as [string, string]
  const lines = head.split('\r\n')
  t.equal(lines[0], 'HTTP/1.1 503 Service Unavailable')
  t.ok(lines.includes('retry-after: 5'), 'a 5 s wait')
  t.ok(lines.includes('content-length: 12'))
  t.ok(lines.includes('content-type: text/plain; charset=utf-8'))
  t.notOk(lines.some((l) => l.toLowerCase().startsWith('ratelimit')), 'headers: false sends none')
  t.equal(body, 'lim rejected')
  t.equal(Buffer.byteLength(body), 12)
})

t.test('per-route overrides: own buckets, cost, a route semaphore, and opting out', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { maxInFlight: 2, rateLimit: { limit: 3, windowMs: 60_000 } })
  app.get('/a', async () => 'a')
  app.get('/b', async () => 'b')
  app.get('/own', { config: { admission: { rateLimit: { limit: 5, windowMs: 60_000 }, cost: 2 } } }, async () => 'own')
  app.get('/free', { config: { admission: false } }, async () => 'free')
  app.get('/unlimited', { config: { admission: { rateLimit: false } } }, async () => 'unlimited')
  // /a and /b share the global bucket of 3 per client.
  t.equal((await app.inject('/a')).statusCode, 200)
  t.equal((await app.inject('/b')).statusCode, 200)
  t.equal((await app.inject('/a')).statusCode, 200)
  t.equal((await app.inject('/b')).statusCode, 429)
  // /own has its own bucket of 5 and costs 2: two pass, the third does not.
  const own = await app.inject('/own')
  t.equal(own.statusCode, 200)
  t.equal(own.headers.ratelimit, '"default";r=3;t=12', 'two of 5 spent, a token every 12 s: the next within 12 s (24 s to full)')
  t.equal((await app.inject('/own')).statusCode, 200)
  t.equal((await app.inject('/own')).statusCode, 429)
  // Another client has its own buckets.
  t.equal((await app.inject({ url: '/a', remoteAddress: '10.0.0.9' })).statusCode, 200)
  // Opted out: no slot, no token, no headers.
  for (let i = 0; i < 10; i++) {
    const res = await app.inject('/free')
    t.equal(res.statusCode, 200)
    t.equal(res.headers.ratelimit, undefined)
  }
  t.equal((await app.inject('/unlimited')).statusCode, 200)
  const stats = app.admission.stats()
  t.equal(stats.routes['GET /free'], undefined, 'an opted-out route is not counted')
  t.match(stats.routes['GET /own'], { admitted: 2, limited: 1 })
  t.match(stats.routes['GET /b'], { admitted: 1, limited: 1 })
  t.match(stats.routes['GET /unlimited'], { admitted: 1, limited: 0 })
})

t.test('a route semaphore sheds that route only, on top of the global gate', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { maxInFlight: 10, rateLimit: false })
  const hold = deferred()
  const entered = deferred()
  app.get('/search', { config: { admission: { maxInFlight: 1 } } }, async () => { entered.resolve(); await hold.promise; return 's' })
  app.get('/other', async () => 'o')
  const port = await listen(app)
  const first = get(port, '/search')
  await entered.promise
  t.equal((await get(port, '/search')).status, 503)
  t.equal((await get(port, '/other')).status, 200)
  t.match(app.admission.stats(), { inFlight: 1, routes: { 'GET /search': { inFlight: 1, shed: 1 } } })
  hold.resolve()
  await first
  t.ok(await eventually(() => app.admission.stats().inFlight === 0))
})

t.test('not-found requests pass no hook of the plugin unless the app wires admission.notFound', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: { limit: 1, windowMs: 60_000 } })
  t.equal((await app.inject('/nope')).statusCode, 404)
  t.equal((await app.inject('/nope')).statusCode, 404, 'not limited: no route, no hook')
  t.match(app.admission.stats().routes['404'], { admitted: 0, limited: 0 })

  const wired = Fastify()
  t.teardown(() => wired.close())
  await wired.register(admission, { maxInFlight: 1, rateLimit: { limit: 2, windowMs: 60_000 } })
  wired.setNotFoundHandler({ preHandler: wired.admission.notFound }, async (_req, reply) => reply.code(404).send('none'))
  const hold = deferred()
  const entered = deferred()
  wired.get('/slow', async () => { entered.resolve(); await hold.promise; return 'slow' })
  t.equal((await wired.inject('/nope')).statusCode, 404)
  const slow = wired.inject('/slow')
  await entered.promise
  const shed = await wired.inject('/nope')
  t.equal(shed.statusCode, 503, 'refused while the gate is full')
  t.equal(shed.headers['retry-after'], '1')
  hold.resolve()
  await slow
  t.equal((await wired.inject('/nope')).statusCode, 429, 'the shared quota: /nope, then /slow took the two')
  t.match(wired.admission.stats().routes['404'], { admitted: 1, limited: 1, shed: 1, inFlight: 0 })
  t.equal(wired.admission.stats().inFlight, 0, 'a 404 holds no permit')
})

t.test('onShed and onLimit are told, with the wait in ms', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  const limited: number[] = []
  const shed: string[] = []
  await app.register(admission, {
    maxInFlight: 1,
    rateLimit: { limit: 1, windowMs: 1_500 },
    // A clock that stands still: the wait is the policy's, whatever the machine's speed.
    backend: memoryBackend({ clock: () => 1_000_000 }),
    onLimit: (_req, ms) => { limited.push(ms) },
    onShed: (req) => { shed.push(req.url) }
  })
  const hold = deferred()
  const entered = deferred()
  app.get('/', async () => 'ok')
  app.get('/slow', { config: { admission: { rateLimit: false } } }, async () => { entered.resolve(); await hold.promise; return 's' })
  t.equal((await app.inject('/')).statusCode, 200)
  const refused = await app.inject('/')
  t.equal(refused.statusCode, 429)
  t.equal(limited.length, 1)
  t.same(limited, [1_500], 'the wait in ms')
  t.equal(refused.headers['retry-after'], '2', '1.5 s rounded up')
  const port = await listen(app)
  const slow = get(port, '/slow')
  await entered.promise
  t.equal((await get(port, '/')).status, 503)
  t.same(shed, ['/'])
  hold.resolve()
  await slow
})

t.test('a full registry refuses new clients with 503 and never resets a live bucket', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: { limit: 2, windowMs: 4_000 }, backend: memoryBackend({ maxIdentities: 2 }) })
  app.get('/', async () => 'ok')
  const from = (ip: string) => app.inject({ url: '/', remoteAddress: ip })
  t.equal((await from('10.0.0.1')).statusCode, 200)
  t.equal((await from('10.0.0.1')).statusCode, 200)
  t.equal((await from('10.0.0.1')).statusCode, 429)
  t.equal((await from('10.0.0.2')).statusCode, 200)
  const third = await from('10.0.0.3')
  t.equal(third.statusCode, 503)
  t.ok(Number(third.headers['retry-after']) >= 2, 'until the earliest bucket can be dropped')
  t.equal((await from('10.0.0.1')).statusCode, 429, 'the live bucket was not reset')
  t.equal(app.admission.stats().identities, 2)
})

t.test('no request byte reaches a header', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: { limit: 1, windowMs: 1_000 }, key: (req) => String(req.headers['x-client']) })
  app.get('/', async () => 'ok')
  for (const client of ['a\r\nx-evil: 1', '"default";r=999', 'ünï']) {
    await app.inject({ url: '/', headers: { 'x-client': encodeURIComponent(client) } })
    const res = await app.inject({ url: '/', headers: { 'x-client': encodeURIComponent(client) } })
    t.equal(res.statusCode, 429)
    t.match(res.headers.ratelimit, /^"default";r=\d+;t=\d+$/)
    t.match(res.headers['retry-after'], /^\d+$/)
    t.equal(res.headers['x-evil'], undefined)
  }
})

