// The Redis clients the backend accepts: ioredis, iovalkey and node-redis (`redis`), recognised by
// their shape at construction and called each in its own convention. Against real servers: the
// shared one for decisions through the HTTP gate (under unique prefixes, keys deleted), a private
// one for NOSCRIPT (a fresh server, then SCRIPT FLUSH — never on the shared one), and a stalling
// proxy in front of the shared one for timeouts (replies held until the test releases them: no
// race with a timed pause).
import Fastify, { type FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import { Cluster, Redis } from 'ioredis'
import { Redis as Redis6 } from 'ioredis6'
import { Cluster as ValkeyCluster, Redis as Valkey } from 'iovalkey'
import { createClient, createCluster } from 'redis'
import type { Policy } from '../../../lib/core/rates/index.js'
import { DECIDE_LUA, DECIDE_SHA } from '../../../lib/backends/redis/decide-script.js'
import { clientShape, scriptCall } from '../../../lib/backends/redis/redis-client.js'
import { RatesInvalidArgumentError, RatesUnavailableError } from '../../../lib/rates/errors.js'
import {
  admission,
  redisBackend
} from '../../../lib/index.js'
import type { NodeRedisScriptClient, NodeRedisScriptOptions, RedisBackendClient, RedisClientShape, RedisScriptClient } from '../../../lib/backends/redis/redis-backend.js'
import { counting, deleteKeys, keysUnder, redisServerMissing, sharedRedis, startPrivateServer, uniquePrefix } from './helpers.js'
import { stallProxy } from './stall-proxy.js'

// Every client of the three packages fits the option's type, each in its own shape.
type NodeRedisClient = ReturnType<typeof createClient>
type NodeRedisCluster = ReturnType<typeof createCluster>
export type ClientsFit = [
  Redis extends RedisScriptClient ? true : never,
  Cluster extends RedisScriptClient ? true : never,
  Valkey extends RedisScriptClient ? true : never,
  ValkeyCluster extends RedisScriptClient ? true : never,
  NodeRedisClient extends NodeRedisScriptClient ? true : never,
  NodeRedisCluster extends NodeRedisScriptClient ? true : never,
  NodeRedisClient extends RedisBackendClient ? true : never
]
const fits: ClientsFit = [true, true, true, true, true, true, true]
void fits

const shared = await sharedRedis()
const sharedSkip = 'skip' in shared ? shared.skip : false
const serverSkip = sharedSkip || await redisServerMissing()
if ('redis' in shared) t.teardown(() => shared.redis.quit())
const admin = (): Redis => (shared as { redis: Redis }).redis
const sharedUrl = 'url' in shared ? shared.url : 'redis://127.0.0.1:1'
const [sharedHost, sharedPort] = ((url) => [url.hostname, Number(url.port || 6379)] as const)(new URL(sharedUrl))

const LIMIT = 3
const policy: Policy = Object.freeze({ algorithm: 'token-bucket', limit: LIMIT, windowMs: 3_600_000, burst: LIMIT })

/** A connected client of one package, with what the test needs to count and close it. */
interface Connected {
  readonly client: RedisBackendClient
  /** The same client behind a wrapper of its own shape that counts EVALSHA and EVAL. */
  readonly counted: RedisBackendClient & { readonly calls: { evalsha: number, eval: number } }
  close (): Promise<void>
}

interface Kind {
  readonly name: string
  readonly shape: RedisClientShape
  connect (url: string): Promise<Connected>
}

function ioredisLike (name: string, Client: typeof Redis | typeof Valkey): Kind {
  return {
    name,
    shape: 'ioredis',
    async connect (url) {
      const client = new Client(url, { lazyConnect: true, connectTimeout: 1000, maxRetriesPerRequest: 1, retryStrategy: () => 50 })
      client.on('error', () => { /* reconnecting: reported as RATES_UNAVAILABLE */ })
      await client.connect()
      return { client, counted: counting(client), close: async () => { client.disconnect() } }
    }
  }
}

const kinds: Kind[] = [
  ioredisLike('ioredis', Redis),
  ioredisLike('ioredis 6', Redis6 as unknown as typeof Redis),
  ioredisLike('iovalkey', Valkey),
  {
    name: 'node-redis',
    shape: 'node-redis',
    async connect (url) {
      const client = createClient({ url, disableOfflineQueue: true, socket: { connectTimeout: 1000, reconnectStrategy: 50 } })
      client.on('error', () => { /* reconnecting: reported as RATES_UNAVAILABLE */ })
      await client.connect()
      const calls = { evalsha: 0, eval: 0 }
      const counted = {
        calls,
        evalSha (sha: string, options: NodeRedisScriptOptions) { calls.evalsha++; return client.evalSha(sha, options) },
        eval (script: string, options: NodeRedisScriptOptions) { calls.eval++; return client.eval(script, options) }
      }
      return { client, counted, close: async () => { client.destroy() } }
    }
  }
]

/** An app whose gate decides on `client`: `LIMIT` per hour per `x-id`. */
async function gate (t: Test, client: RedisBackendClient, prefix: string, timeoutMs = 2000): Promise<FastifyInstance> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, {
    backend: redisBackend({ client, prefix, timeoutMs }),
    rateLimit: policy,
    key: (request) => String(request.headers['x-id'] ?? 'anonymous')
  })
  app.get('/r', async () => 'ok')
  await app.ready()
  return app
}

async function statuses (app: FastifyInstance, id: string, n: number): Promise<number[]> {
  const found: number[] = []
  for (let i = 0; i < n; i++) found.push((await app.inject({ url: '/r', headers: { 'x-id': id } })).statusCode)
  return found
}

t.test('shapes: recognised at construction, by the methods alone', async (t) => {
  const io = new Redis({ lazyConnect: true })
  const valkey = new Valkey({ lazyConnect: true })
  const ioCluster = new Cluster([], { lazyConnect: true })
  const valkeyCluster = new ValkeyCluster([], { lazyConnect: true })
  const node = createClient()
  const nodeCluster = createCluster({ rootNodes: [] })
  for (const [client, shape] of [[io, 'ioredis'], [valkey, 'ioredis'], [ioCluster, 'ioredis'], [valkeyCluster, 'ioredis'], [node, 'node-redis'], [nodeCluster, 'node-redis']] as const) {
    const backend = redisBackend({ client })
    t.equal(backend.clientShape, shape, `${client.constructor.name}: ${shape}`)
    t.equal(backend.client, client, 'the client itself is kept')
  }
  // Nothing was connected: nothing to close but ioredis's reconnect timers (none with lazyConnect).
  for (const client of [io, valkey, ioCluster, valkeyCluster]) client.disconnect()

  t.equal(clientShape({ evalsha () {}, evalSha () {}, eval () {} }), 'ioredis', 'both spellings: taken as ioredis-shaped, as before')
  t.equal(clientShape({ evalSha () {}, eval () {} }), 'node-redis')
  t.equal(clientShape({ evalsha () {}, eval () {} }), 'ioredis')
})

t.test('bad clients are refused at construction with RatesInvalidArgumentError showing the value', async (t) => {
  const cases: Array<[unknown, RegExp]> = [
    [undefined, /got undefined/],
    [42, /got 42 \(number\)/],
    ['redis://127.0.0.1:6379', /got 'redis:\/\/127\.0\.0\.1:6379' \(string\)/],
    [createClient, /got \[Function: createClient\]/],
    [{ evalSha () {} }, /got \{ evalSha: \[Function: evalSha\] \}/],
    [{ evalSha: 'x', eval () {} }, /got \{ evalSha: 'x', eval: \[Function: eval\] \}/],
    [{ eval () {} }, /got \{ eval: \[Function: eval\] \}/],
    [{ EVALSHA () {}, EVAL () {} }, /got \{ EVALSHA: \[Function: EVALSHA\], EVAL: \[Function: EVAL\] \}/]
  ]
  for (const [client, shown] of cases) {
    const error = (() => { try { redisBackend({ client } as never) } catch (e) { return e } })()
    t.ok(error instanceof RatesInvalidArgumentError, String(shown))
    t.match(error, { code: 'RATES_INVALID_ARGUMENT', path: 'options.client' })
    t.match((error as Error).message, /^Expected `options\.client` to be a Redis client with evalsha\(\) and eval\(\) \(an ioredis or iovalkey instance\), got /)
    t.match((error as Error).message, / — or a node-redis client or cluster, with evalSha\(\) and eval\(\)$/)
    t.match((error as Error).message, shown)
    t.equal((error as RatesInvalidArgumentError).value, client, 'the value itself is on the error')
  }
})

t.test('node-redis shape (a fake): evalSha(sha, { keys, arguments }), EVAL once on NOSCRIPT, eval for the registry', async (t) => {
  const calls: Array<[string, string, NodeRedisScriptOptions]> = []
  let answer: (method: string) => Promise<unknown> = async () => [0, 1, 2, 0, 5000, 4000, 4500]
  const fake: NodeRedisScriptClient = {
    evalSha (sha, options) { calls.push(['evalSha', sha, options]); return answer('evalSha') },
    eval (script, options) { calls.push(['eval', script, options]); return answer('eval') }
  }
  const limiter = redisBackend({ client: fake, prefix: 'p:', denyCache: false }).limiter('app#a', policy)
  t.same(await limiter.consume('sa', 1), { allowed: true, denied: false, remaining: 2, resetAt: 5000, moreAt: 4500 })
  t.same(calls, [['evalSha', DECIDE_SHA, { keys: ['p:{app#a:sa}'], arguments: ['token-bucket:3:3600000:3', '1'] }]])

  calls.length = 0
  answer = async (method) => {
    if (method === 'evalSha') throw new Error('NOSCRIPT No matching script. Please use EVAL.')
    return [0, 1, 1, 0, 5000, 4000, 4500]
  }
  t.match(await limiter.consume('sa', 2), { allowed: true, remaining: 1 })
  t.same(calls.map(([method, script]) => [method, script === DECIDE_LUA ? 'DECIDE_LUA' : script]), [['evalSha', DECIDE_SHA], ['eval', 'DECIDE_LUA']], 'NOSCRIPT → one EVAL of the source')
  const sent = calls[1]?.[2] as { keys: string[], arguments: string[] }
  t.same(sent.keys, ['p:{app#a:sa}'])
  // The first reply told the server's time (4000): this decision carries a deadline after it.
  t.same(sent.arguments.slice(0, 3), ['token-bucket:3:3600000:3', '2', ''])
  t.ok(Number(sent.arguments[3]) >= 4000 + 50, `a deadline at least timeoutMs after the server time seen: ${sent.arguments[3]}`)
  t.same(calls[0]?.[2], sent, 'the EVAL carries the same keys and arguments as the EVALSHA it replaces')

  calls.length = 0
  answer = async () => { throw new Error('ERR something else') }
  t.match(await limiter.consume('sa', 1).catch((e: unknown) => e), { code: 'RATES_UNAVAILABLE', message: /Redis failed: ERR something else/ })
  t.equal(calls.length, 1, 'another error: no EVAL')

  calls.length = 0
  answer = () => { throw new Error('The client is closed') }
  const thrown = await limiter.consume('sa', 1).catch((e: unknown) => e)
  t.ok(thrown instanceof RatesUnavailableError, 'a synchronous throw rejects')
  t.match(thrown, { message: /The client is closed/ })

  calls.length = 0
  answer = async () => 1
  t.equal(await limiter.delete('sa'), true)
  t.same(calls.map(([method, , options]) => [method, options]), [['eval', { keys: ['p:{app#a:sa}'], arguments: ['token-bucket:3:3600000:3'] }]], 'the registry: EVAL')
})

t.test('scriptCall: each shape gets the key and the arguments its way', async (t) => {
  const seen: unknown[][] = []
  const io: RedisScriptClient = {
    evalsha: async (...args) => { seen.push(['evalsha', ...args]); return 'a' },
    eval: async (...args) => { seen.push(['eval', ...args]); return 'b' }
  }
  const node: NodeRedisScriptClient = {
    evalSha: async (...args) => { seen.push(['evalSha', ...args]); return 'c' },
    eval: async (...args) => { seen.push(['eval', ...args]); return 'd' }
  }
  t.equal(await scriptCall(io, 'ioredis')('sha', 'S', 'k', ['x', 'y']), 'a')
  t.equal(await scriptCall(io, 'ioredis')('source', 'L', 'k', []), 'b')
  t.equal(await scriptCall(node, 'node-redis')('sha', 'S', 'k', ['x', 'y']), 'c')
  t.equal(await scriptCall(node, 'node-redis')('source', 'L', 'k', []), 'd')
  t.same(seen, [
    ['evalsha', 'S', 1, 'k', 'x', 'y'],
    ['eval', 'L', 1, 'k'],
    ['evalSha', 'S', { keys: ['k'], arguments: ['x', 'y'] }],
    ['eval', 'L', { keys: ['k'], arguments: [] }]
  ])
})

for (const kind of kinds) {
  t.test(`${kind.name}: decisions through the HTTP gate on the shared Redis`, { skip: sharedSkip }, async (t) => {
    const { client, close } = await kind.connect(sharedUrl)
    t.teardown(close)
    const prefix = uniquePrefix(`clients-${kind.name}`)
    t.teardown(async () => { await deleteKeys(admin(), prefix) })
    const app = await gate(t, client, prefix)
    t.equal((await app.inject({ url: '/r', headers: { 'x-id': 'warm' } })).statusCode, 200, 'warm (loads the script if the server lacks it)')

    t.same(await statuses(app, 'alice', LIMIT + 2), [200, 200, 200, 429, 429], `${LIMIT} admitted, then 429`)
    const refused = await app.inject({ url: '/r', headers: { 'x-id': 'alice' } })
    t.equal(refused.statusCode, 429)
    t.ok(Number(refused.headers['retry-after']) >= 1, `Retry-After: ${String(refused.headers['retry-after'])}`)
    t.same(await statuses(app, 'bob', 1), [200], 'another identity has its own quota')
    t.match(app.admission.stats().routes['GET /r'], { admitted: 1 + LIMIT + 1, limited: 3, unavailable: 0 })
    const keys = await keysUnder(admin(), prefix)
    t.same(keys.map((key) => key.slice(key.lastIndexOf(':') + 1)), ['alice}', 'bob}', 'warm}'], 'one key per identity, in the shared Redis')
  })

  t.test(`${kind.name}: NOSCRIPT on a fresh server, and after SCRIPT FLUSH, is answered by one EVAL`, { skip: serverSkip }, async (t) => {
    const server = await startPrivateServer()
    t.teardown(server.stop)
    const { counted, close } = await kind.connect(server.url)
    t.teardown(close)
    const app = await gate(t, counted, 'admission:')
    t.same(await server.admin.script('EXISTS', DECIDE_SHA), [0], 'a fresh server has no script')
    t.same(await statuses(app, 'carol', 1), [200])
    t.same(counted.calls, { evalsha: 1, eval: 1 }, 'NOSCRIPT → EVAL, which loads it')
    t.same(await server.admin.script('EXISTS', DECIDE_SHA), [1], 'loaded')
    t.same(await statuses(app, 'carol', 1), [200])
    t.same(counted.calls, { evalsha: 2, eval: 1 }, 'then EVALSHA alone')

    t.equal(await server.admin.script('FLUSH'), 'OK')
    t.same(await statuses(app, 'carol', 2), [200, 429], 'the state survived the flush: the third unit, then 429')
    t.same(counted.calls, { evalsha: 4, eval: 2 }, 'NOSCRIPT after the flush → one EVAL')
    t.match(app.admission.stats().routes['GET /r'], { admitted: 3, limited: 1, unavailable: 0 })
  })

  t.test(`${kind.name}: a reply that does not come in timeoutMs is RATES_UNAVAILABLE (503 at the gate); decisions resume after`, { skip: sharedSkip }, async (t) => {
    const proxy = await stallProxy(sharedHost, sharedPort)
    t.teardown(() => proxy.close())
    const { client, close } = await kind.connect(proxy.url)
    t.teardown(close)
    const prefix = uniquePrefix(`timeout-${kind.name}`)
    t.teardown(async () => { await deleteKeys(admin(), prefix) })
    const timeoutMs = 500
    const app = await gate(t, client, prefix, timeoutMs)
    t.same(await statuses(app, 'dave', 1), [200], 'through the proxy, Redis answers')

    proxy.stall()
    const held = await app.inject({ url: '/r', headers: { 'x-id': 'dave' } })
    t.equal(held.statusCode, 503, 'no reply: 503 (onBackendError deny)')
    t.ok(Number(held.headers['retry-after']) >= 1, 'with Retry-After')
    const backend = redisBackend({ client, prefix, timeoutMs })
    const error = await backend.limiter('direct#t', policy).consume('dave', 1).catch((e: unknown) => e)
    t.ok(error instanceof RatesUnavailableError)
    t.match(error, { code: 'RATES_UNAVAILABLE', message: `Redis did not answer within ${timeoutMs} ms` })
    t.match(app.admission.stats().routes['GET /r'], { admitted: 1, unavailable: 1 })

    proxy.release()
    // The held replies arrive now and are dropped; the timed-out call still ran on Redis (a
    // timeout is not a cancellation), so dave has one unit left.
    t.same(await statuses(app, 'dave', 2), [200, 429], 'decisions resume on the same client')
  })
}
