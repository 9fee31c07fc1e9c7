// The registry and the gate's failure answers on a real Redis: states read and deleted by key,
// another policy at the same address (a rolling deploy) answered by onBackendError, never a 500,
// and `version` as the documented way through a policy change; keys that UTF-8 would merge kept apart.
import t from 'tap'
import Fastify from 'fastify'
import type { Redis } from 'ioredis'
import admission, { RatesPolicyConflictError, RatesStoppedError, RatesUnavailableError, redisBackend } from '../../../lib/index.js'
import { deleteKeys, sharedRedis, uniquePrefix } from './helpers.js'

const shared = await sharedRedis()
const skip = 'skip' in shared ? shared.skip : false
const redis = 'redis' in shared ? shared.redis : (undefined as unknown as Redis)
if (!skip) t.teardown(() => redis.quit())

// A token a 6 s: the sixth of six decisions in a row is denied however slow a busy machine is.
const TB = { algorithm: 'token-bucket', limit: 10, windowMs: 60_000, burst: 5 } as const

t.test('delete(): a reply the script never gives is RATES_UNAVAILABLE (no Redis needed)', async (t) => {
  const client = { evalsha: async () => null, eval: async () => 'weird' }
  const limiter = redisBackend({ client, timeoutMs: 1000 }).limiter('app#x', TB)
  t.match(await limiter.delete('sa').catch((e: unknown) => e), { code: 'RATES_UNAVAILABLE', message: /unexpected reply from the delete script/ })
})

t.test('state() and delete() on Redis: the kernel\'s state, conflicts and junk refused, the deny cache forgotten', { skip }, async (t) => {
  const prefix = uniquePrefix('registry')
  t.teardown(() => deleteKeys(redis, prefix))
  const backend = redisBackend({ client: redis, prefix, timeoutMs: 1000 })
  const limiter = backend.limiter('app#admission:*', TB)
  t.equal(await limiter.state('sa'), undefined, 'nothing stored')
  t.equal(await limiter.delete('sa'), false)
  for (let i = 0; i < 6; i++) await limiter.consume('sa', 1)
  const state = await limiter.state('sa') as { tokens: number, last: number }
  // Tokens are counted in 1/windowMs of a token, so less than one is less than windowMs units
  // (what the five refilled while they ran: 10 units a ms, however long a busy machine took).
  t.ok(state.tokens < TB.windowMs && Number.isSafeInteger(state.last), `empty (less than a token, ${TB.windowMs} units): ${JSON.stringify(state)}`)
  t.equal(limiter.cache?.size, 1, 'the sixth was denied: remembered')
  t.equal(await limiter.delete('sa'), true)
  t.equal(limiter.cache?.size, 0, 'a deleted state leaves no local denial behind')
  t.equal(await limiter.state('sa'), undefined)
  t.match(await limiter.consume('sa', 1), { allowed: true, remaining: 4 }, 'fresh again')

  const key = limiter.keyOf('sb')
  await redis.set(key, 'fixed-window:3:1000 0 1', 'PX', 60_000)
  t.type(await limiter.state('sb').catch((e: unknown) => e), RatesPolicyConflictError)
  t.type(await limiter.delete('sb').catch((e: unknown) => e), RatesPolicyConflictError)
  t.equal(await redis.exists(key), 1, 'another policy\'s state is never deleted')
  for (const junk of ['garbage', 'token-bucket:10:60000:5 1.5 x', 'token-bucket:10:60000:5 1']) {
    await redis.set(key, junk, 'PX', 60_000)
    t.type(await limiter.state('sb').catch((e: unknown) => e), RatesUnavailableError, junk)
  }
  await redis.set(key, 'garbage', 'PX', 60_000)
  t.type(await limiter.delete('sb').catch((e: unknown) => e), RatesUnavailableError)
  await backend.stop()
  t.type(await limiter.state('sa').catch((e: unknown) => e), RatesStoppedError)
  t.type(await limiter.delete('sa').catch((e: unknown) => e), RatesStoppedError)
})

t.test('the gate on Redis: registry by client key, and keys with lone surrogates kept apart', { skip }, async (t) => {
  const prefix = uniquePrefix('gate-registry')
  t.teardown(() => deleteKeys(redis, prefix))
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, {
    backend: redisBackend({ client: redis, prefix, timeoutMs: 1000 }),
    rateLimit: { limit: 1, windowMs: 60_000 },
    key: (request) => String(request.headers['x-k']).replace('LONE', '\uD800').replace('REPL', '\uFFFD')
  })
  app.get('/', async () => 'ok')
  t.equal((await app.inject({ url: '/', headers: { 'x-k': 'LONE' } })).statusCode, 200)
  t.equal((await app.inject({ url: '/', headers: { 'x-k': 'REPL' } })).statusCode, 200, 'not merged with the lone surrogate as U+FFFD')
  t.equal((await app.inject({ url: '/', headers: { 'x-k': 'LONE' } })).statusCode, 429)
  t.match(await app.admission.registry.get('\uD800'), { tokens: Number, last: Number })
  t.equal(await app.admission.registry.delete('\uD800'), true)
  t.equal((await app.inject({ url: '/', headers: { 'x-k': 'LONE' } })).statusCode, 200, 'reset')
})

t.test('a rolling deploy on one prefix: the other version\'s clients get 503 by onBackendError, never a 500; with version, both serve', { skip }, async (t) => {
  const prefix = uniquePrefix('deploy')
  t.teardown(() => deleteKeys(redis, prefix))
  const start = async (options: { limit: number, version?: string }): Promise<ReturnType<typeof Fastify>> => {
    const app = Fastify()
    t.teardown(() => app.close())
    const { limit, version } = options
    await app.register(admission, {
      backend: redisBackend({ client: redis, prefix, timeoutMs: 1000, denyCache: false }),
      rateLimit: { limit, windowMs: 60_000 },
      ...(version === undefined ? {} : { version })
    })
    app.get('/', async () => 'ok')
    return app
  }
  const old = await start({ limit: 5 })
  const next = await start({ limit: 10 })
  t.equal((await old.inject('/')).statusCode, 200, 'the old version writes the client')
  const clash = await next.inject('/')
  t.equal(clash.statusCode, 503, 'the new version meets the old policy: fail closed, as onBackendError says')
  t.match(clash.headers['retry-after'], /^\d+$/)
  t.notMatch(clash.body, /admission|token-bucket|app#|limit/, 'no internals in the body')
  t.match(next.admission.stats(), { unavailable: 1, admitted: 0 })

  const versioned = await start({ limit: 10, version: '2' })
  for (let i = 0; i < 10; i++) t.equal((await versioned.inject('/')).statusCode, 200, `v2 request ${i + 1}: a quota of its own, fresh`)
  t.equal((await versioned.inject('/')).statusCode, 429)
  t.equal((await old.inject('/')).statusCode, 200, 'the old version goes on with its own')
  const keys = await redis.keys(`${prefix}*`)
  t.equal(keys.filter((k) => k.includes('#admission@2:')).length, 1, 'v2\'s key sits at its own address')
  t.ok(await Promise.all(keys.map((k) => redis.pttl(k))).then((ttls) => ttls.every((ms) => ms > 0)), 'every key has a TTL (old ones expire)')
})
