// Redis out of reach at start: ready() passes (Redis may come up after the app), the gate says so
// once, at warn, naming the backend and the fix, and keeps failing closed. No server is needed: the
// client points at a free port nothing listens on.
import t from 'tap'
import Fastify from 'fastify'
import { Redis } from 'ioredis'
import admission, { redisBackend } from '../../../lib/index.js'
import { eventually } from '../../helpers/http.js'
import { freePort } from './helpers.js'

t.test('Redis down at start: one warning naming the backend and the fix, and decisions fail closed', async (t) => {
  const port = await freePort()
  const client = new Redis({ port, host: '127.0.0.1', retryStrategy: () => 200, maxRetriesPerRequest: 1 })
  client.on('error', () => { /* the test's own listener: the warning is the point */ })
  t.teardown(() => { client.disconnect() })
  const lines: Array<{ level: number, msg: string, backend?: string }> = []
  const app = Fastify({ logger: { level: 'warn', stream: { write: (line: string) => { lines.push(JSON.parse(line)) } } } })
  t.teardown(() => app.close())
  await app.register(admission, { backend: redisBackend({ client }), rateLimit: { limit: 5, windowMs: 60_000 } })
  app.get('/', async () => 'ok')
  await app.ready()
  t.ok(await eventually(() => lines.some((line) => line.backend === 'redis'), 5000), 'warned')
  const warned = lines.filter((line) => line.backend === 'redis')
  t.equal(warned.length, 1, 'once')
  t.match(warned[0]!.msg, /the redis backend cannot be reached at start .*answered 503 with Retry-After \(onBackendError: 'deny'\).*'error' listener/)
  const answer = await app.inject('/')
  t.equal(answer.statusCode, 503, 'fail closed')
  t.ok(Number(answer.headers['retry-after']) >= 1)
  // With onBackendError: 'allow', the warning says so.
  const allowing: typeof lines = []
  const open = Fastify({ logger: { level: 'warn', stream: { write: (line: string) => { allowing.push(JSON.parse(line)) } } } })
  t.teardown(() => open.close())
  await open.register(admission, { backend: redisBackend({ client }), onBackendError: 'allow' })
  await open.ready()
  t.ok(await eventually(() => allowing.some((line) => line.backend === 'redis'), 5000))
  t.match(allowing.find((line) => line.backend === 'redis')!.msg, /admits the request \(onBackendError: 'allow'\)/)
})

t.test('a reachable backend, or one the gate does not use, says nothing', async (t) => {
  const lines: string[] = []
  const app = Fastify({ logger: { level: 'warn', stream: { write: (line: string) => { lines.push(line) } } } })
  t.teardown(() => app.close())
  let asked = 0
  const backend = { kind: 'custom', limiter: () => { throw new Error('unused') }, stop: async () => {}, reachable: async () => { asked++ } }
  await app.register(admission, { backend: backend as never, rateLimit: false })
  await app.ready()
  t.equal(asked, 0, 'no rate limit: not asked')
  const other = Fastify({ logger: { level: 'warn', stream: { write: (line: string) => { lines.push(line) } } } })
  t.teardown(() => other.close())
  const { memoryBackend } = await import('../../../lib/index.js')
  const memory = memoryBackend()
  await other.register(admission, { backend: { kind: 'answers', limiter: memory.limiter.bind(memory), stop: async () => {}, reachable: async () => { asked++ } } as never })
  await other.ready()
  t.equal(asked, 1, 'asked once at ready')
  await new Promise((resolve) => setTimeout(resolve, 20))
  t.same(lines, [])
})

t.test("reachable() asks the client's own word, never Redis", async (t) => {
  const { EventEmitter } = await import('node:events')
  const ioredisShaped = { evalsha: async () => { throw new Error('no command is sent') }, eval: async () => { throw new Error('no command is sent') } }
  await t.resolves(redisBackend({ client: { ...ioredisShaped, status: 'ready' } as never }).reachable(), 'connected')
  await t.resolves(redisBackend({ client: ioredisShaped }).reachable(), 'a client that says nothing of its state')
  await t.resolves(redisBackend({ client: { ...ioredisShaped, status: 'connecting' } as never }).reachable(), 'one that cannot be waited on')
  const nodeRedis = Object.assign(new EventEmitter(), { evalSha: async () => null, eval: async () => null, isReady: false })
  setTimeout(() => { nodeRedis.emit('ready') }, 20)
  await t.resolves(redisBackend({ client: nodeRedis as never }).reachable(), "node-redis, connected within the wait: its 'ready'")
  const never = Object.assign(new EventEmitter(), { evalSha: async () => null, eval: async () => null, isReady: false })
  const alive = setTimeout(() => {}, 5000) // the wait's timer is unref'd: an app's server keeps the process up, here this does
  const error = await redisBackend({ client: never as never }).reachable().then(() => undefined, (e: unknown) => e)
  clearTimeout(alive)
  t.match(error, { code: 'RATES_UNAVAILABLE', message: /not connected \(not ready\) after 2000 ms/ })
  t.equal(never.listenerCount('ready'), 0, 'no listener left behind')
})
