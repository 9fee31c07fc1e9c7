import t from 'tap'
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import { clientKey, gateKey } from '../../lib/gate/client-key.js'
import { AdmissionKeyError } from '../../lib/gate/errors.js'
import { thrown } from '../helpers/errors.js'
import admission, { AdmissionOptionError, normalizeIP } from '../../lib/index.js'
import type { AdmissionOptions } from '../../lib/index.js'

t.test('IPv4 addresses are their own key', async (t) => {
  for (const ip of ['1.2.3.4', '127.0.0.1', '0.0.0.0', '255.255.255.255', '10.0.0.1']) {
    for (const subnet of [1, 56, 64, 128]) t.equal(clientKey(ip, subnet), ip, `${ip} /${subnet}`)
  }
  t.not(clientKey('10.0.0.1', 56), clientKey('10.0.0.2', 56), 'no grouping of IPv4 addresses')
})

t.test('an undefined address is the empty key', async (t) => {
  t.equal(clientKey(undefined, 56), '')
  t.equal(clientKey(undefined, 128), '')
})

t.test('IPv4-mapped IPv6 is the IPv4 address, whatever the spelling and subnet', async (t) => {
  const spellings = [
    '::ffff:1.2.3.4',
    '::FFFF:1.2.3.4',
    '::ffff:102:304',
    '::FFFF:102:304',
    '0:0:0:0:0:ffff:102:304',
    '0000:0000:0000:0000:0000:ffff:0102:0304',
    '0:0:0:0:0:ffff:1.2.3.4',
    '::ffff:1.2.3.4%eth0'
  ]
  for (const ip of spellings) {
    for (const subnet of [1, 56, 96, 128]) t.equal(clientKey(ip, subnet), '1.2.3.4', `${ip} /${subnet}`)
  }
  t.equal(clientKey('::ffff:255.254.0.9', 56), '255.254.0.9')
  t.equal(clientKey('::ffff:fffe:9', 56), '255.254.0.9', 'hex form: high and low byte of each group')
  t.equal(clientKey('::ffff:0.0.0.0', 56), '0.0.0.0')
  t.equal(clientKey('::ffff:1.2.3.4', 56), clientKey('1.2.3.4', 56), 'shares the IPv4 client\'s bucket')
  // Only ::ffff:0:0/96 is mapped; the deprecated IPv4-compatible ::a.b.c.d and the
  // translated ::ffff:0:a.b.c.d forms are ordinary IPv6 addresses.
  t.equal(clientKey('::1.2.3.4', 128), '0:0:0:0:0:0:102:304/128')
  t.equal(clientKey('::ffff:0:1.2.3.4', 128), '0:0:0:0:ffff:0:102:304/128')
  t.equal(clientKey('1::ffff:1.2.3.4', 128), '1:0:0:0:0:ffff:102:304/128')
})

t.test('IPv6 addresses are grouped by their first `subnet` bits', async (t) => {
  // /56: the first three groups and the high byte of the fourth.
  t.equal(clientKey('2001:db8::1', 56), '2001:db8:0:0:0:0:0:0/56')
  t.equal(clientKey('2001:db8:0:ff::2', 56), '2001:db8:0:0:0:0:0:0/56', 'same /56')
  t.equal(clientKey('2001:db8:0:ff:ffff:ffff:ffff:ffff', 56), '2001:db8:0:0:0:0:0:0/56', 'last address of the /56')
  t.equal(clientKey('2001:db8:0:100::', 56), '2001:db8:0:100:0:0:0:0/56', 'next /56')
  t.not(clientKey('2001:db8:0:100::1', 56), clientKey('2001:db8::1', 56))
  t.not(clientKey('2001:db8:1::1', 56), clientKey('2001:db8::1', 56))
  t.equal(clientKey('2001:DB8:0:AB12::1', 56), '2001:db8:0:ab00:0:0:0:0/56', 'case-insensitive, masked inside a group')

  // /64
  t.equal(clientKey('2001:db8:0:ff::2', 64), '2001:db8:0:ff:0:0:0:0/64')
  t.equal(clientKey('2001:db8:0:ff:1:2:3:4', 64), clientKey('2001:db8:0:ff::9', 64))
  t.not(clientKey('2001:db8:0:ff::2', 64), clientKey('2001:db8::1', 64), 'different /64 in the same /56')

  // /128: every address its own key, in one canonical spelling.
  t.equal(clientKey('2001:db8::1', 128), '2001:db8:0:0:0:0:0:1/128')
  t.equal(clientKey('2001:0DB8:0000:0000:0000:0000:0000:0001', 128), clientKey('2001:db8::1', 128), 'spellings of one address share a key')
  t.not(clientKey('2001:db8::1', 128), clientKey('2001:db8::2', 128))
  t.equal(clientKey('1:2:3:4:5:6:7:8', 128), '1:2:3:4:5:6:7:8/128')
  t.equal(clientKey('1:2:3:4:5:6:7::', 128), '1:2:3:4:5:6:7:0/128', ':: for one group at the end')
  t.equal(clientKey('::2:3:4:5:6:7:8', 128), '0:2:3:4:5:6:7:8/128', ':: for one group at the start')
  t.equal(clientKey('1:2:3:4:5:6:1.2.3.4', 128), '1:2:3:4:5:6:102:304/128', 'embedded IPv4 without ::')

  // /1: only the top bit counts.
  t.equal(clientKey('2001:db8::1', 1), '0:0:0:0:0:0:0:0/1')
  t.equal(clientKey('7fff:ffff::', 1), '0:0:0:0:0:0:0:0/1')
  t.equal(clientKey('8000::', 1), '8000:0:0:0:0:0:0:0/1')
  t.equal(clientKey('ffff:ffff::1', 1), '8000:0:0:0:0:0:0:0/1')

  // Boundaries inside a group.
  t.equal(clientKey('ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 17), 'ffff:8000:0:0:0:0:0:0/17')
  t.equal(clientKey('ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 127), 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/127')
  t.equal(clientKey('ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 48), 'ffff:ffff:ffff:0:0:0:0:0/48')
  t.equal(clientKey('ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 63), 'ffff:ffff:ffff:fffe:0:0:0:0/63')

  // The subnet is part of the key.
  t.not(clientKey('::1', 56), clientKey('::1', 64))
})

t.test('zone ids are ignored', async (t) => {
  t.equal(clientKey('fe80::1%eth0', 128), 'fe80:0:0:0:0:0:0:1/128')
  t.equal(clientKey('fe80::1%eth0', 64), clientKey('fe80::1', 64))
  t.equal(clientKey('fe80::1%1', 56), 'fe80:0:0:0:0:0:0:0/56')
})

t.test('the unspecified and loopback addresses', async (t) => {
  t.equal(clientKey('::', 56), '0:0:0:0:0:0:0:0/56')
  t.equal(clientKey('::', 128), '0:0:0:0:0:0:0:0/128')
  t.equal(clientKey('::1', 128), '0:0:0:0:0:0:0:1/128')
  t.equal(clientKey('::1', 56), '0:0:0:0:0:0:0:0/56')
})

t.test('malformed addresses are returned unchanged (a key of their own)', async (t) => {
  const malformed = [
    '1::2::3', // two ::
    ':::',
    'gggg::1', // not hex
    '12345::1', // five hex digits
    '1:2:3:4:5:6:7:8:9', // too many groups
    '1:2:3:4:5:6:7', // too few, no ::
    '1:2:3:4:5:6:7::8', // :: standing for no group
    '::1:2:3:4:5:6:7:8',
    ':1',
    '1:',
    ':',
    '1::2:',
    '::ffff:1.2.3.256', // bad embedded IPv4
    '::ffff:1.2.3', // three octets
    '::ffff:1.2.3.4.5', // five octets
    '::ffff:-1.2.3.4',
    '::1.2.3.4:1', // embedded IPv4 not last
    '1:2:3:4:5:6:7:1.2.3.4', // nine groups' worth
    '::ffff:1.2.3.4/96'
  ]
  for (const ip of malformed) {
    t.equal(clientKey(ip, 56), ip, ip)
    t.equal(clientKey(ip, 128), ip, `${ip} /128`)
  }
  // Unchanged means unique: no two malformed inputs collide, and none takes a valid client's key.
  t.equal(new Set(malformed.map((ip) => clientKey(ip, 56))).size, malformed.length)
  t.not(clientKey('1::2::3', 56), clientKey('1::2', 56))
})

// BUG(lib/client-key.ts): the embedded-IPv4 parser uses Number(), which accepts '' (so '1..3.4'
// is 1.0.3.4), leading zeros, hex ('0x4'), exponents ('1e0') and blanks, and a dotted quad is
// also accepted at the end of the part before '::' ('1.2.3.4::'). node:net.isIPv6() rejects all of
// these. Reachable only through X-Forwarded-For with trustProxy (a client that can choose its
// key anyway), so harmless in practice, but these inputs are not "returned unchanged".
// Expected to fail until lib is fixed.
t.test('malformed embedded IPv4 is returned unchanged', async (t) => {
  for (const ip of ['::ffff:1..3.4', '::ffff:01.2.3.4', '::ffff:1.2.3.0x4', '::ffff:1e0.2.3.4', '::ffff: 1.2.3.4', '1.2.3.4::']) {
    t.equal(clientKey(ip, 56), ip, ip)
  }
})

async function appWith (options: AdmissionOptions, fastifyOptions: FastifyServerOptions = {}): Promise<FastifyInstance> {
  const app = Fastify(fastifyOptions)
  await app.register(admission, options)
  app.get('/', async () => 'ok')
  await app.ready()
  return app
}

const oneToken = { rateLimit: { limit: 1, windowMs: 3_600_000 } }

t.test('plugin: IPv6 clients in one /56 share a bucket by default', async (t) => {
  const app = await appWith(oneToken)
  t.teardown(() => app.close())
  const get = async (remoteAddress: string): Promise<number> => (await app.inject({ url: '/', remoteAddress })).statusCode
  t.equal(await get('2001:db8::1'), 200)
  t.equal(await get('2001:db8:0:ff::2'), 429, 'same /56: the bucket is spent')
  t.equal(await get('2001:db8:0:100::1'), 200, 'next /56: its own bucket')
  t.equal(await get('::ffff:10.0.0.1'), 200)
  t.equal(await get('10.0.0.1'), 429, 'the IPv4-mapped address is the IPv4 client')
  t.equal(await get('10.0.0.2'), 200)
  t.equal(app.admission.stats().identities, 4, 'two /56 groups and two IPv4 clients')
})

t.test('plugin: ipv6Subnet 128 gives every address its own bucket', async (t) => {
  const app = await appWith({ ...oneToken, ipv6Subnet: 128 })
  t.teardown(() => app.close())
  const get = async (remoteAddress: string): Promise<number> => (await app.inject({ url: '/', remoteAddress })).statusCode
  t.equal(await get('2001:db8::1'), 200)
  t.equal(await get('2001:db8::2'), 200)
  t.equal(await get('2001:0db8:0:0::1'), 429, 'another spelling of the first address')
})

t.test('plugin: with trustProxy, X-Forwarded-For decides the key', async (t) => {
  const app = await appWith(oneToken, { trustProxy: true })
  t.teardown(() => app.close())
  const get = async (remoteAddress: string, xff: string): Promise<number> =>
    (await app.inject({ url: '/', remoteAddress, headers: { 'x-forwarded-for': xff } })).statusCode
  t.equal(await get('10.0.0.1', '203.0.113.7'), 200)
  t.equal(await get('10.0.0.1', '203.0.113.8'), 200, 'same proxy, another client')
  t.equal(await get('10.0.0.2', '203.0.113.7'), 429, 'same client through another proxy')
  t.equal(await get('10.0.0.1', '2001:db8::5, 10.0.0.9'), 200)
  t.equal(await get('10.0.0.1', '2001:db8:0:7::5'), 429, 'the forwarded IPv6 address is grouped by /56')
})

t.test('plugin: without trustProxy, X-Forwarded-For is ignored', async (t) => {
  const app = await appWith(oneToken)
  t.teardown(() => app.close())
  const get = async (xff: string): Promise<number> =>
    (await app.inject({ url: '/', remoteAddress: '10.0.0.1', headers: { 'x-forwarded-for': xff } })).statusCode
  t.equal(await get('203.0.113.7'), 200)
  t.equal(await get('203.0.113.8'), 429)
})

t.test('plugin: the key option replaces the address', async (t) => {
  const seen: string[] = []
  const app = await appWith({
    ...oneToken,
    key: (request) => {
      seen.push(request.url)
      return String(request.headers['x-tenant'])
    }
  })
  t.teardown(() => app.close())
  const get = async (tenant: string, remoteAddress: string): Promise<number> =>
    (await app.inject({ url: '/', remoteAddress, headers: { 'x-tenant': tenant } })).statusCode
  t.equal(await get('a', '10.0.0.1'), 200)
  t.equal(await get('a', '10.0.0.2'), 429, 'another address, same key')
  t.equal(await get('b', '10.0.0.1'), 200, 'same address, another key')
  t.equal(await get('2001:db8::1', '10.0.0.1'), 200)
  t.equal(await get('2001:db8::2', '10.0.0.1'), 200, 'a key is used as it is, never grouped')
  t.same(seen, ['/', '/', '/', '/', '/'])
})

t.test('plugin: a key that is not a string is a 500 ADMISSION_INVALID_KEY and frees the slot', async (t) => {
  const values: unknown[] = [5, undefined, null, { ip: '1.2.3.4' }, Symbol('k')]
  for (const value of values) {
    const app = await appWith({ maxInFlight: 4, key: () => value as string })
    const res = await app.inject({ url: '/' })
    t.equal(res.statusCode, 500, String(value))
    const body = res.json() as { code: string, message: string }
    t.equal(body.code, 'ADMISSION_INVALID_KEY')
    t.match(body.message, /Expected the `key` option to return a string/)
    const stats = app.admission.stats()
    t.equal(stats.inFlight, 0, 'the global slot is back')
    t.equal(stats.routes['GET /']!.inFlight, 0, 'the route slot is back')
    t.equal(stats.admitted, 0)
    t.equal(stats.identities, 0)
    await app.close()
  }
  // A string key still works after the failures (nothing leaked).
  let bad = true
  const app = await appWith({ maxInFlight: 1, key: () => (bad ? 1 : 'ok') as string })
  t.teardown(() => app.close())
  t.equal((await app.inject('/')).statusCode, 500)
  t.equal((await app.inject('/')).statusCode, 500, 'a leaked slot would shed this one with 503')
  bad = false
  t.equal((await app.inject('/')).statusCode, 200)
  t.equal(app.admission.stats().inFlight, 0)
})

t.test('plugin: the key error reaches a custom error handler as AdmissionKeyError', async (t) => {
  const app = Fastify()
  await app.register(admission, { key: () => 42 as unknown as string })
  app.setErrorHandler(async (error, _request, reply) => {
    const e = error as Error & { code?: string, value?: unknown }
    return reply.code(418).send({ name: e.name, code: e.code, value: e.value })
  })
  app.get('/', async () => 'ok')
  t.teardown(() => app.close())
  const res = await app.inject('/')
  t.equal(res.statusCode, 418)
  t.same(res.json(), { name: 'AdmissionKeyError', code: 'ADMISSION_INVALID_KEY', value: 42 })
})

t.test('gateKey: injective, escapes only what UTF-8 would merge, bounded', async (t) => {
  t.equal(gateKey('alice'), 'alice', 'a well-formed key is itself (no copy on the hot path)')
  t.equal(gateKey(''), '')
  t.equal(gateKey('10.0.0.1'), '10.0.0.1')
  const lone = ['\uD800', '\uDBFF', '\uDC00', 'a\uD800b', '\uD800\uD800']
  const keys = [...lone, '\uFFFD', '\u0000', '\u0000"\\ud800"', 'x\u0000', '\uD83D\uDE00']
  const encoded = keys.map(gateKey)
  t.equal(new Set(encoded).size, keys.length, 'no two keys share an encoding')
  for (const e of encoded) t.ok((e as string & { isWellFormed (): boolean }).isWellFormed(), `${JSON.stringify(e)} is well-formed (stored alike on every backend)`)
  t.equal(gateKey('\uD800'), '\u0000"\\ud800"')
  t.equal(gateKey('\u0000x'), '\u0000"\\u0000x"', 'a key starting with NUL is escaped too, so no escaped form equals a plain key')
  t.equal(gateKey('x'.repeat(1024)), 'x'.repeat(1024), '1024 bytes is the bound')
  t.equal(gateKey('é'.repeat(512)), 'é'.repeat(512), '512 two-byte characters')
  for (const [value, got] of [['x'.repeat(1025), 'a string of 1025 UTF-8 bytes (as stored)'], ['é'.repeat(513), 'a string of 1026 UTF-8 bytes (as stored)'],
    [5, 'a value of type number'], [null, 'null'], [Promise.resolve('k'), 'a value of type object']] as const) {
    const error = thrown(() => gateKey(value)) as AdmissionKeyError
    t.type(error, AdmissionKeyError)
    t.equal(error.message, `Expected the \`key\` option to return a string of at most 1024 UTF-8 bytes, got ${got}`)
    t.equal(error.value, value)
  }
})

t.test('plugin: keys that differ only in lone surrogates get separate quotas; an over-long key is a 500 that echoes nothing', async (t) => {
  const app = await appWith({ rateLimit: { limit: 1, windowMs: 60_000 }, key: (request) => String(request.headers['x-k'] ?? '').replace('LONE', '\uD800').replace('PAIR', '\uFFFD') })
  t.teardown(() => app.close())
  t.equal((await app.inject({ url: '/', headers: { 'x-k': 'LONE' } })).statusCode, 200)
  t.equal((await app.inject({ url: '/', headers: { 'x-k': 'PAIR' } })).statusCode, 200, 'U+FFFD is not the lone surrogate')
  t.equal((await app.inject({ url: '/', headers: { 'x-k': 'LONE' } })).statusCode, 429)
  const long = await app.inject({ url: '/', headers: { 'x-k': 'secret'.repeat(200) } })
  t.equal(long.statusCode, 500)
  t.notMatch(long.body, /secret/)
  t.equal(app.admission.stats().inFlight, 0)
})

t.test('the registry is reached with the same key the gate uses', async (t) => {
  const app = await appWith({ rateLimit: { limit: 2, windowMs: 60_000 }, key: (request) => String(request.headers['x-k']) })
  t.teardown(() => app.close())
  await app.inject({ url: '/', headers: { 'x-k': 'u1' } })
  t.match(await app.admission.registry.get('u1'), { tokens: 60_000, last: Number })
  t.equal(await app.admission.registry.get('u2'), undefined)
})

t.test('normalizeIP: the default key\'s value, for a key function that shares its quota', async (t) => {
  t.equal(normalizeIP('1.2.3.4'), '1.2.3.4')
  t.equal(normalizeIP('::ffff:1.2.3.4'), '1.2.3.4')
  t.equal(normalizeIP('2001:db8:1:2ff::1'), '2001:db8:1:200:0:0:0:0/56', 'grouped by 56 bits, the default')
  t.equal(normalizeIP('2001:db8:1:2ff::1', 64), '2001:db8:1:2ff:0:0:0:0/64')
  t.equal(normalizeIP('Example.COM'), 'example.com', 'anything else lowercased, as @fastify/rate-limit\'s')
  for (const [args, path] of [[[1], 'normalizeIP(ip)'], [['::1', 0], 'normalizeIP(ip, ipv6Subnet)'], [['::1', 129], 'normalizeIP(ip, ipv6Subnet)']] as const) {
    const error = thrown(() => normalizeIP(...(args as unknown as [string, number])))
    t.type(error, AdmissionOptionError)
    t.equal((error as AdmissionOptionError).path, path)
  }
  // A key that falls back to it shares the default's quota: one client, one bucket.
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: { limit: 2, windowMs: 60_000 }, key: (request) => String(request.headers['x-api-key'] ?? normalizeIP(request.ip)) })
  app.get('/', async () => 'ok')
  const statuses: number[] = []
  for (const ip of ['2001:db8::1', '2001:db8::2', '2001:db8::3']) statuses.push((await app.inject({ url: '/', remoteAddress: ip })).statusCode)
  t.same(statuses, [200, 200, 429], 'addresses of one /56 share one quota')
  t.ok(app.admission.registry.get('2001:db8:0:0:0:0:0:0/56') !== undefined, 'under the default key\'s name')
})
