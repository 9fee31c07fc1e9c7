// Golden Redis keys: the full key strings the Redis backend writes for the gate's quotas and the
// rates capability's limiters, pinned byte for byte as the code wrote them at c593bb6:
// `<prefix>{<address>:<identity>}` for one policy, `<prefix>{<address>:<identity>}/<i>` for policy
// i of a stack. A deploy of a new version must find every one of these keys (see
// addresses.test.ts for the addresses alone). Read back with KEYS on a redis-server of the test's
// own (no other writer), killed at teardown; skipped with the reason when none can be started.
import t, { type Test } from 'tap'
import Fastify from 'fastify'
import type { Redis } from 'ioredis'
import admission, { redisBackend, type RatePolicy } from '../../lib/index.js'
import { redisServerMissing, startPrivateServer, testClient, type PrivateServer } from '../backends/redis/helpers.js'

const skip = await redisServerMissing()

const P: RatePolicy = { algorithm: 'fixed-window', limit: 5, windowMs: 60_000 }
const PAIR: RatePolicy[] = [P, { ...P, windowMs: 3_600_000 }]

/** A private server and a client on it, both ended at teardown. */
async function server (t: Test): Promise<{ server: PrivateServer, client: Redis }> {
  const server = await startPrivateServer()
  t.teardown(server.stop)
  const client = testClient(server.url)
  await client.connect()
  t.teardown(() => client.disconnect())
  return { server, client }
}

async function allKeys (server: PrivateServer): Promise<string[]> {
  return (await server.admin.keys('*')).sort()
}

t.test('gate: the keys of its quotas', { skip }, async (t) => {
  const { server: redis, client } = await server(t)
  const backend = redisBackend({ client, timeoutMs: 2000 })
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend, rateLimit: P })
  app.get('/shared', async () => 'shared')
  app.get('/x', { config: { admission: { rateLimit: P } } }, async () => 'x')
  app.get('/s', { config: { admission: { rateLimit: PAIR } } }, async () => 's')
  app.get('/t', { config: { admission: { rateLimit: { tiers: { free: P, pro: PAIR }, tier: (request) => String(request.headers['x-plan']) } } } }, async () => 't')
  app.get('/g', { config: { admission: { groupId: 'team a~b', rateLimit: P } } }, async () => 'g')
  app.post('/login', { config: { admission: { rateLimit: P, count: 'failures' } } }, async (_request, reply) => reply.code(401).send('no'))
  await app.register(async function shop (c) {
    await c.register(admission, { backend, version: 'v2', rateLimit: PAIR })
    c.get('/y', async () => 'y')
  }, { prefix: '/shop' })
  await app.ready()
  const statuses = [
    (await app.inject('/shared')).statusCode,
    (await app.inject({ url: '/shared', remoteAddress: '2001:db8:1:2:3:4:5:6' })).statusCode,
    (await app.inject('/x')).statusCode,
    (await app.inject('/s')).statusCode,
    (await app.inject({ url: '/t', headers: { 'x-plan': 'free' } })).statusCode,
    (await app.inject({ url: '/t', headers: { 'x-plan': 'pro' } })).statusCode,
    (await app.inject('/g')).statusCode,
    (await app.inject({ method: 'POST', url: '/login' })).statusCode,
    (await app.inject('/shop/y')).statusCode
  ]
  t.strictSame(statuses, [200, 200, 200, 200, 200, 200, 200, 401, 200], 'every request decided (a backend failure would be a 503)')
  t.strictSame(await allKeys(redis), [
    'admission:{app#admission:*:127.0.0.1}', // the shared quota, client 127.0.0.1 (also for GET /shop/y)
    'admission:{app#admission:*:2001:db8:1:0:0:0:0:0/56}', // an IPv6 client: its /56
    'admission:{app#admission:GET%20%2Fs:127.0.0.1}/0', // a stack: one key per policy, after the tag
    'admission:{app#admission:GET%20%2Fs:127.0.0.1}/1',
    'admission:{app#admission:GET%20%2Ft%7Efree:127.0.0.1}',
    'admission:{app#admission:GET%20%2Ft%7Epro:127.0.0.1}/0',
    'admission:{app#admission:GET%20%2Ft%7Epro:127.0.0.1}/1',
    'admission:{app#admission:GET%20%2Fx:127.0.0.1}',
    'admission:{app#admission:POST%20%2Flogin:127.0.0.1}/0', // login throttling: a failure, on a stack of one
    'admission:{app#admission:group%3Ateam%20a%7Eb:127.0.0.1}',
    'admission:{app/shop@%2Fshop#admission@v2:*:127.0.0.1}/0', // a child's registration, with a version
    'admission:{app/shop@%2Fshop#admission@v2:*:127.0.0.1}/1'
  ])
})

t.test('gate: a key option\'s values and another prefix', { skip }, async (t) => {
  const { server: redis, client } = await server(t)
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, {
    backend: redisBackend({ client, prefix: 'golden:', timeoutMs: 2000 }),
    rateLimit: P,
    key: (request) => request.headers['x-lone'] === undefined ? String(request.headers['x-user']) : '\ud800'
  })
  app.get('/', async () => 'ok')
  const statuses = [
    (await app.inject({ url: '/', headers: { 'x-user': 'user:{42}' } })).statusCode,
    (await app.inject({ url: '/', headers: { 'x-user': 'ü ~' } })).statusCode,
    (await app.inject({ url: '/', headers: { 'x-lone': '1' } })).statusCode
  ]
  t.strictSame(statuses, [200, 200, 200])
  t.strictSame(await allKeys(redis), [
    'golden:{app#admission:*:\u0000"\\ud800"}', // not well-formed: NUL, then its JSON
    'golden:{app#admission:*:user:{42}}', // braces in a key: the tag ends at its first `}`
    'golden:{app#admission:*:ü ~}' // a key as it is (UTF-8 on the wire)
  ])
})

t.test('rates: the keys of its limiters, by identity', { skip }, async (t) => {
  const { server: redis, client } = await server(t)
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend: redisBackend({ client, timeoutMs: 2000 }), rateLimit: false })
  const decisions: boolean[] = []
  await app.register(async function child (c) {
    decisions.push((await c.rates.use('send', P).consume('alice')).allowed)
  }, { prefix: '/c' })
  await app.ready()
  const send = app.rates.use('send', P)
  for (const identity of ['alice', 'a}b', 42, 1n, true, ['a', 1], { userId: 'u1', tenantId: 't1' }] as const) {
    decisions.push((await send.consume(identity)).allowed)
  }
  decisions.push((await app.rates.use('pair', PAIR).consume('alice')).allowed)
  decisions.push((await app.rates.global.use('egress', P).consume('alice')).allowed)
  decisions.push((await app.rates.use('a~b c/d', P).consume('alice')).allowed)
  t.strictSame(decisions, new Array(11).fill(true))
  t.strictSame(await allKeys(redis), [
    'admission:{app#a~b%20c%2Fd:salice}',
    'admission:{app#pair:salice}/0',
    'admission:{app#pair:salice}/1',
    'admission:{app#send:R8:tenantId3:st16:userId3:su1}', // a record: fields by name
    'admission:{app#send:T2:sa2:n1}', // a tuple
    'admission:{app#send:b1}', // a bigint
    'admission:{app#send:n42}', // a number
    'admission:{app#send:salice}', // a string
    'admission:{app#send:sa}b}', // a string with `}`: the tag ends inside it
    'admission:{app#send:t}', // true
    'admission:{app/child@%2Fc#send:salice}',
    'admission:{global#egress:salice}'
  ])
})
