// One benchmark server: `node --import tsx bench/server.ts <variant> [keys]`, started by run.ts
// under `taskset -c 0`. It listens on a free loopback port, tells the parent which (IPC), answers
// CPU-usage queries, and exits when the parent goes away.
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify'
import rateLimit from '@fastify/rate-limit'
import underPressure from '@fastify/under-pressure'
import { Redis } from 'ioredis'
// The package as built (`npm run bench` builds it first), as users run it: through tsx, lib/'s
// function expressions would each be wrapped by esbuild's keepNames helper, a cost the build has not.
import admission, { redisBackend } from '../dist/index.js'
import { CLIENT_HEADER, variant } from './variants.js'

const HOUR = 3_600_000
// Every Redis variant has a key prefix of its own, deleted at start, on the machine's Redis.
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
// Throughput, not the fail policy, is measured: with Redis sharing the two saturated cores a
// decision can exceed the default 50 ms, and the gate would then (rightly) answer 503.
const BENCH_TIMEOUT_MS = 1000

async function redisClient (app: FastifyInstance, prefix: string, autoPipelining: boolean): Promise<Redis> {
  const client = new Redis(REDIS_URL, { enableAutoPipelining: autoPipelining })
  const stale = await client.keys(`${prefix}*`)
  if (stale.length > 0) await client.del(...stale)
  app.addHook('onClose', async () => { await client.quit() })
  return client
}
/**
 * The load's client identity, from the raw header list. `request.headers` would have Node build the
 * whole headers object, which bare Fastify never does here: that cost would be the key function's,
 * not the limiter's (the plugin's default key, `request.ip`, reads no header). Both plugins get it.
 */
function byHeader (request: FastifyRequest): string {
  const raw = request.raw.rawHeaders
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.length === CLIENT_HEADER.length && raw[i]!.toLowerCase() === CLIENT_HEADER) return raw[i + 1]!
  }
  throw new Error(`no ${CLIENT_HEADER} header`)
}
const oneClient = (): string => 'one'

/** A Redis variant's name ends with `-ap` when its ioredis client has `enableAutoPipelining`. */
const AUTO_PIPELINING = '-ap'

async function build (name: string, keys: number): Promise<FastifyInstance> {
  const app = Fastify({ logger: false })
  const autoPipelining = name.startsWith('redis-') || name.startsWith('rl-redis-') ? name.endsWith(AUTO_PIPELINING) : false
  const base = autoPipelining ? name.slice(0, -AUTO_PIPELINING.length) : name
  switch (base) {
    case 'bare':
    case 'bare-twin':
      break
    case 'admit':
      await app.register(admission, { maxInFlight: 10_000, rateLimit: { limit: 1e9, windowMs: 60_000 }, key: byHeader })
      break
    case 'admit-noheaders':
      await app.register(admission, { maxInFlight: 10_000, rateLimit: { limit: 1e9, windowMs: 60_000 }, key: byHeader, headers: false })
      break
    case 'admit-nomaxinflight':
      await app.register(admission, { maxInFlight: false, rateLimit: { limit: 1e9, windowMs: 60_000 }, key: byHeader })
      break
    case 'onrequest-empty':
      app.addHook('onRequest', (_request, _reply, done) => { done() })
      break
    case 'onrequest-2headers': {
      let remaining = 1e9
      app.addHook('onRequest', (_request, reply, done) => {
        reply.header('ratelimit-policy', '"default";q=1000000000;w=60').header('ratelimit', `"default";r=${--remaining};t=1`)
        done()
      })
      break
    }
    case 'empty-hooks-abort':
      app.addHook('onRequestAbort', (_request, done) => { done() })
    // falls through
    case 'empty-hooks':
      app.addHook('onRequest', (_request, _reply, done) => { done() })
      app.addHook('onResponse', (_request, _reply, done) => { done() })
      break
    case 'hooks':
      await app.register(admission, { maxInFlight: false, rateLimit: false })
      break
    case 'refuse':
      await app.register(admission, { maxInFlight: 10_000, rateLimit: { limit: 1, windowMs: HOUR }, key: oneClient })
      break
    case 'refuse-noheaders':
      await app.register(admission, { maxInFlight: 10_000, rateLimit: { limit: 1, windowMs: HOUR }, key: oneClient, headers: false })
      break
    case 'hook-429': {
      let spent = false
      app.addHook('onRequest', (_request, reply, done) => {
        if (!spent) { spent = true; done(); return }
        reply.code(429).header('retry-after', '3600').header('content-type', 'application/json; charset=utf-8')
          .send('{"statusCode":429,"error":"Too Many Requests","message":"Rate limit exceeded, retry in 3600 seconds"}')
      })
      break
    }
    case 'rl-admit':
      // `cache` holds every key of the load's pool, as the plugin's registry does (default 5000 would evict).
      await app.register(rateLimit, { max: 1e9, timeWindow: 60_000, keyGenerator: byHeader, cache: Math.max(keys, 5000) })
      break
    case 'rl-refuse':
      await app.register(rateLimit, { max: 1, timeWindow: HOUR, keyGenerator: oneClient })
      break
    case 'under-pressure':
      await app.register(underPressure)
      break
    case 'admission-pressure':
      // The same signals through this plugin (its under-pressure defaults), no quota.
      await app.register(admission, { rateLimit: false, pressure: { maxEventLoopDelay: 1000 } })
      break
    case 'redis-admit':
    case 'redis-admit-fw': {
      const client = await redisClient(app, `bench:${name}:`, autoPipelining)
      const algorithm = base === 'redis-admit-fw' ? 'fixed-window' as const : 'token-bucket' as const
      await app.register(admission, { maxInFlight: 10_000, rateLimit: { algorithm, limit: 1e9, windowMs: 60_000 }, key: byHeader, backend: redisBackend({ client, prefix: `bench:${name}:`, timeoutMs: BENCH_TIMEOUT_MS }) })
      break
    }
    case 'redis-refuse':
    case 'redis-refuse-nocache': {
      const prefix = `bench:${name}:`
      const client = await redisClient(app, prefix, autoPipelining)
      const backend = redisBackend({ client, prefix, timeoutMs: BENCH_TIMEOUT_MS, ...(base === 'redis-refuse-nocache' ? { denyCache: false as const } : {}) })
      await app.register(admission, { maxInFlight: 10_000, rateLimit: { limit: 1, windowMs: HOUR }, key: oneClient, backend })
      break
    }
    case 'redis-hot': {
      const client = await redisClient(app, `bench:${name}:`, autoPipelining)
      await app.register(admission, { maxInFlight: 10_000, rateLimit: { limit: 1e9, windowMs: 60_000 }, key: oneClient, backend: redisBackend({ client, prefix: `bench:${name}:`, timeoutMs: BENCH_TIMEOUT_MS, leases: true }) })
      break
    }
    case 'rl-redis-hot': {
      const client = await redisClient(app, `bench:${name}:`, autoPipelining)
      await app.register(rateLimit, { max: 1e9, timeWindow: 60_000, keyGenerator: oneClient, redis: client, nameSpace: `bench:${name}:` })
      break
    }
    case 'rl-redis-admit':
    case 'rl-redis-refuse': {
      const client = await redisClient(app, `bench:${name}:`, autoPipelining)
      await app.register(rateLimit, base === 'rl-redis-admit'
        ? { max: 1e9, timeWindow: 60_000, keyGenerator: byHeader, redis: client, nameSpace: `bench:${name}:` }
        : { max: 1, timeWindow: HOUR, keyGenerator: oneClient, redis: client, nameSpace: `bench:${name}:` })
      break
    }
    default:
      variant(name)
  }
  app.get('/', async () => ({ hello: 'world' }))
  await app.ready()
  if (variant(name).status === 429) {
    // Spend the one client's only token before the load starts.
    const first = await app.inject({ url: '/', headers: { [CLIENT_HEADER]: 'one' } })
    const second = await app.inject({ url: '/', headers: { [CLIENT_HEADER]: 'one' } })
    if (first.statusCode !== 200 || second.statusCode !== 429) throw new Error(`${name}: expected 200 then 429, got ${first.statusCode}, ${second.statusCode}`)
  }
  return app
}

const [name = '', keysArg = '10000'] = process.argv.slice(2)
const app = await build(name, Number(keysArg))
await app.listen({ host: '127.0.0.1', port: 0 })
const address = app.server.address()
if (address === null || typeof address === 'string') throw new Error('no TCP address')
process.on('message', (message) => {
  if (message === 'cpu') process.send?.({ cpu: process.cpuUsage() })
})
process.on('disconnect', () => { process.exit(0) })
process.send?.({ port: address.port })
