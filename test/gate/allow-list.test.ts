// `allowList` (as @fastify/rate-limit's): client keys, IP addresses and CIDR ranges (node:net's
// BlockList, IPv4 and IPv6), or a synchronous function. A client on it skips the rate limit — no
// token, no RateLimit headers — and is still shed unless `allowList.skipsShedding` says otherwise.
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import admission, { AdmissionOptionError, type AdmissionOptions } from '../../lib/index.js'
import { deferred, eventually, get, listen } from '../helpers/http.js'

const ONE = { algorithm: 'fixed-window', limit: 1, windowMs: 60_000 } as const

async function appWith (t: Test, options: AdmissionOptions): Promise<FastifyInstance> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: ONE, ...options })
  app.get('/x', async () => 'ok')
  return app
}

const from = async (app: FastifyInstance, remoteAddress: string, headers: Record<string, string> = {}): Promise<{ statusCode: number, headers: Record<string, unknown>, json: () => unknown }> =>
  await app.inject({ url: '/x', remoteAddress, headers })

t.test('addresses and CIDR ranges, IPv4 and IPv6 (IPv4-mapped included): no token, no headers, counted', async (t) => {
  const app = await appWith(t, { allowList: ['10.0.0.0/8', '192.0.2.7', '2001:db8::/32', '::1'] })
  for (const ip of ['10.1.2.3', '::ffff:10.200.0.1', '192.0.2.7', '2001:db8:1::5', '::1']) {
    for (let i = 0; i < 3; i++) {
      const res = await from(app, ip)
      t.equal(res.statusCode, 200, `${ip} #${i}`)
      t.notOk('ratelimit' in res.headers, `${ip}: no RateLimit headers for a client the limit does not apply to`)
    }
  }
  for (const ip of ['11.0.0.1', '192.0.2.8', '2001:db9::1']) {
    t.equal((await from(app, ip)).statusCode, 200, ip)
    t.equal((await from(app, ip)).statusCode, 429, `${ip} is limited`)
  }
  t.match(app.admission.stats(), { admitted: 18, allowed: 15, limited: 3, identities: 3, routes: { 'GET /x': { allowed: 15 } } })
})

t.test('keys, with a `key` option: matched against what it returns', async (t) => {
  const app = await appWith(t, { key: (request) => String(request.headers['x-tenant']), allowList: ['internal', '10.0.0.0/8'] })
  for (let i = 0; i < 3; i++) t.equal((await from(app, '203.0.113.1', { 'x-tenant': 'internal' })).statusCode, 200)
  t.equal((await from(app, '10.0.0.9', { 'x-tenant': 'anyone' })).statusCode, 200, 'an address entry matches request.ip')
  t.equal((await from(app, '10.0.0.9', { 'x-tenant': 'anyone' })).statusCode, 200)
  t.equal((await from(app, '203.0.113.1', { 'x-tenant': 'other' })).statusCode, 200)
  t.equal((await from(app, '203.0.113.1', { 'x-tenant': 'other' })).statusCode, 429)
  t.match(app.admission.stats(), { allowed: 5, limited: 1 })
})

t.test('a function of the request and the key; truthy allows; a promise or a throw is a 500, the permit given back', async (t) => {
  const seen: string[] = []
  let answer: (key: string) => unknown = (key) => key === '198.51.100.1' ? 'yes' : 0
  const app = await appWith(t, { maxInFlight: 5, allowList: (_request, key) => { seen.push(key); return answer(key) } })
  for (let i = 0; i < 3; i++) t.equal((await from(app, '198.51.100.1')).statusCode, 200)
  t.equal((await from(app, '198.51.100.2')).statusCode, 200)
  t.equal((await from(app, '198.51.100.2')).statusCode, 429)
  t.same(seen, ['198.51.100.1', '198.51.100.1', '198.51.100.1', '198.51.100.2', '198.51.100.2'])
  answer = async () => true
  const promised = await from(app, '198.51.100.3')
  t.equal(promised.statusCode, 500)
  t.match(promised.json(), { code: 'ADMISSION_INVALID_ALLOW_LIST_RESULT', message: /return a boolean synchronously, got a promise/ })
  answer = () => { throw new Error('directory down') }
  const thrown = await from(app, '198.51.100.3')
  t.equal(thrown.statusCode, 500)
  t.match(thrown.json(), { message: 'directory down' })
  t.match(app.admission.stats(), { inFlight: 0, allowed: 3, limited: 1 })
})

t.test('allowed clients are shed like any other by default; allowList.skipsShedding lets them through a full gate', async (t) => {
  for (const skips of [false, true]) {
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(admission, {
      maxInFlight: 1,
      rateLimit: ONE,
      key: (request) => String(request.headers['x-id']),
      allowList: { clients: (request) => request.headers['x-internal'] === '1', skipsShedding: skips }
    })
    const hold = deferred()
    const entered = deferred()
    app.get('/slow', async () => { entered.resolve(); await hold.promise; return 'slow' })
    app.get('/x', async () => 'ok')
    const port = await listen(app)
    const slow = get(port, '/slow', { 'x-id': 'a' })
    await entered.promise
    const internal = await get(port, '/x', { 'x-id': 'b', 'x-internal': '1' })
    t.equal(internal.status, skips ? 200 : 503, `skipsShedding: ${skips}`)
    const other = await get(port, '/x', { 'x-id': 'c' })
    t.equal(other.status, 503, 'a client not on the list is shed')
    hold.resolve()
    await slow
    t.ok(await eventually(() => app.admission.stats().inFlight === 0))
    t.match(app.admission.stats(), { allowed: skips ? 1 : 0, shed: skips ? 1 : 2 })
  }
})

t.test('allowList.skipsShedding: an allowed request holds a free permit; the key runs once', async (t) => {
  let keys = 0
  const app = await appWith(t, {
    maxInFlight: 1,
    key: (request) => { keys++; return String(request.headers['x-id']) },
    allowList: { clients: ['ops'], skipsShedding: true }
  })
  const hold = deferred()
  const entered = deferred()
  app.get('/slow', async () => { entered.resolve(); await hold.promise; return 'slow' })
  const port = await listen(app)
  const slow = get(port, '/slow', { 'x-id': 'ops' })
  await entered.promise
  t.equal(app.admission.stats().inFlight, 1, 'the allowed request holds the free permit')
  t.equal((await get(port, '/x', { 'x-id': 'ops' })).status, 200, 'and another goes on while the gate is full')
  t.equal((await get(port, '/x', { 'x-id': 'user' })).status, 503)
  hold.resolve()
  await slow
  t.ok(await eventually(() => app.admission.stats().inFlight === 0))
  t.equal((await get(port, '/x', { 'x-id': 'user' })).status, 200)
  t.equal((await get(port, '/x', { 'x-id': 'user' })).status, 429)
  t.equal(keys, 5, 'one key per request')
  t.match(app.admission.stats(), { allowed: 2, shed: 1, limited: 1, admitted: 3 })
  // A key that throws: 500, nothing held.
  const failing = await appWith(t, { key: () => { throw new Error('no key') }, allowList: { clients: ['ops'], skipsShedding: true }, maxInFlight: 1 })
  t.equal((await failing.inject('/x')).statusCode, 500)
  t.equal(failing.admission.stats().inFlight, 0)
})

t.test('allowList.skipsShedding on a route without a rate limit, and a route allow list replacing the plugin\'s', async (t) => {
  const app = await appWith(t, { maxInFlight: 1, allowList: { clients: ['10.0.0.1'], skipsShedding: true } })
  app.get('/free', { config: { admission: { rateLimit: false } } }, async () => 'ok')
  app.get('/own', { config: { admission: { allowList: ['10.0.0.2'] } } }, async () => 'ok')
  t.equal((await app.inject({ url: '/free', remoteAddress: '10.0.0.1' })).statusCode, 200)
  t.equal((await app.inject({ url: '/free', remoteAddress: '10.0.0.3' })).statusCode, 200)
  for (let i = 0; i < 2; i++) t.equal((await app.inject({ url: '/own', remoteAddress: '10.0.0.2' })).statusCode, 200)
  t.equal((await app.inject({ url: '/own', remoteAddress: '10.0.0.1' })).statusCode, 200)
  t.equal((await app.inject({ url: '/own', remoteAddress: '10.0.0.1' })).statusCode, 429, "the plugin's list does not apply there")
  t.match(app.admission.stats().routes, { 'GET /free': { allowed: 1, admitted: 2 }, 'GET /own': { allowed: 2, limited: 1 } })
})

t.test('the 404 hook uses the plugin\'s allow list; an undefined request.ip is on no list', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: ONE, allowList: ['127.0.0.1'] })
  app.setNotFoundHandler({ preHandler: app.admission.notFound }, async (_request, reply) => reply.code(404).send('no'))
  for (let i = 0; i < 3; i++) t.equal((await app.inject({ url: '/nope', remoteAddress: '127.0.0.1' })).statusCode, 404)
  t.equal((await app.inject({ url: '/nope', remoteAddress: '127.0.0.2' })).statusCode, 404)
  t.equal((await app.inject({ url: '/nope', remoteAddress: '127.0.0.2' })).statusCode, 429)
  t.match(app.admission.stats().routes['404'], { allowed: 3, limited: 1 })
  const { allowListOption, REMEMBERED_ADDRESSES } = await import('../../lib/gate/options/allow-list.js')
  const matcher = allowListOption('allowList', ['0.0.0.0/1'], false)!
  t.equal(matcher({ ip: undefined } as never, ''), false)
  t.equal(matcher({ ip: '8.8.8.8' } as never, ''), true)
  // Answers are remembered up to a bound, then forgotten at once: still right after that.
  for (let i = 0; i <= REMEMBERED_ADDRESSES; i++) matcher({ ip: `200.0.${i >> 8}.${i & 255}` } as never, '')
  t.equal(matcher({ ip: '8.8.8.8' } as never, ''), true)
  t.equal(matcher({ ip: '200.0.0.1' } as never, ''), false)
  t.equal(matcher({ ip: '8.8.8.8' } as never, ''), true, 'remembered again')
})

t.test('the 404 hook with an allow list sheds while the gate is full', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { maxInFlight: 1, rateLimit: ONE, allowList: ['127.0.0.1'] })
  app.setNotFoundHandler({ preHandler: app.admission.notFound }, async (_request, reply) => reply.code(404).send('no'))
  const hold = deferred()
  const entered = deferred()
  app.get('/slow', async () => { entered.resolve(); await hold.promise; return 'slow' })
  await app.ready()
  const slow = app.inject('/slow')
  await entered.promise
  const shed = await app.inject('/nope')
  t.equal(shed.statusCode, 503)
  t.equal(shed.headers['retry-after'], '1')
  hold.resolve()
  await slow
  t.equal((await app.inject('/nope')).statusCode, 404)
})

t.test('allowList and allowList.skipsShedding are checked at registration, showing the value', async (t) => {
  const accessor = Object.defineProperty(['a'], 0, { get: () => 'b', enumerable: true })
  const holey = ['10.0.0.1', , '10.0.0.2'] // eslint-disable-line no-sparse-arrays
  const extra = Object.assign(['10.0.0.1'], { extra: 1 })
  const holeWithExtra = Object.assign(['10.0.0.1', , ], { note: 1 }) // eslint-disable-line no-sparse-arrays
  for (const [options, path, expected] of [
    [{ allowList: '10.0.0.1' }, 'allowList', /an array of client keys, IP addresses and CIDR ranges, or a synchronous function/],
    [{ allowList: new Proxy(['10.0.0.1'], {}) }, 'allowList', /an array of client keys/],
    [{ allowList: async () => true }, 'allowList', /a synchronous function \(request, key\) => boolean/],
    [{ allowList: [42] }, 'allowList[0]', 'Expected `allowList[0]` to be a non-empty string, got 42 (number)'],
    [{ allowList: [''] }, 'allowList[0]', /a non-empty string/],
    [{ allowList: ['10.0.0.0/33'] }, 'allowList[0]', "Expected `allowList[0]` to be an IP address, or a CIDR range address/bits with bits from 0 to 32, got '10.0.0.0/33' (string)"],
    [{ allowList: ['2001:db8::/x'] }, 'allowList[0]', /bits from 0 to 128/],
    [{ allowList: ['partner'] }, 'allowList[0]', /an IP address or a CIDR range \(without a `key` option the client's key is its address\)/],
    [{ allowList: ['x'.repeat(1025)], key: () => 'k' }, 'allowList[0]', /a client key of at most 1024 UTF-8 bytes/],
    [{ allowList: holey }, 'allowList', /no holes, no other keys/],
    [{ allowList: extra }, 'allowList', /no holes, no other keys/],
    [{ allowList: holeWithExtra }, 'allowList[1]', /no holes/],
    [{ allowList: accessor }, 'allowList[0]', /an accessor property/],
    [{ allowList: new Array(100_001).fill('10.0.0.1') }, 'allowList', /at most 100000 entries/],
    [{ allowList: { clients: ['10.0.0.1'], skipsShedding: 'yes' } }, 'allowList.skipsShedding', /a boolean/],
    [{ allowList: { skipsShedding: true } }, 'allowList.clients', /an array of client keys, IP addresses and CIDR ranges, or a synchronous function \(request, key\) => boolean \(the clients on the list\)/],
    [{ allowList: { clients: ['10.0.0.1'], skipsShedding: true }, hook: 'preHandler' }, 'allowList.skipsShedding', /false with hook 'preHandler'/],
    [{ allowList: { clients: [42] } }, 'allowList.clients[0]', /a non-empty string/],
    [{ allowList: { client: ['10.0.0.1'] } }, 'allowList.client', /unknown option; did you mean `clients`\?/],
    [{ allowList: ['10.0.0.1'], allowListSkipsShedding: true }, 'options.allowListSkipsShedding', 'Expected `options.allowListSkipsShedding` to be a known option (unknown option; moved to `allowList: { clients, skipsShedding: true }`: a property of the allow list), got true (boolean)']
  ] as Array<[Record<string, unknown>, string, string | RegExp]>) {
    const app = Fastify()
    const error = await app.register(admission, options as AdmissionOptions).ready().then(() => undefined, (e: unknown) => e)
    t.type(error, AdmissionOptionError, path)
    t.match(error, { code: 'ADMISSION_INVALID_OPTION', path, message: expected }, path)
    await app.close()
  }
  // A route may not move the check of a plugin whose allow list skips shedding into preHandler.
  const app = Fastify()
  await app.register(admission, { allowList: { clients: ['10.0.0.1'], skipsShedding: true } })
  app.get('/x', { config: { admission: { hook: 'preHandler' } } }, async () => 'ok')
  t.match(await app.ready().then(() => undefined, (e: unknown) => e), { code: 'ADMISSION_INVALID_OPTION', path: 'config.admission of GET /x.hook', message: /'onRequest' while allowList.skipsShedding is true/ })
  await app.close()
  const route = Fastify()
  await route.register(admission)
  route.get('/x', { config: { admission: { allowList: ['nope'] } } }, async () => 'ok')
  t.match(await route.ready().then(() => undefined, (e: unknown) => e), { path: 'config.admission of GET /x.allowList[0]', value: 'nope' })
  await route.close()
})
