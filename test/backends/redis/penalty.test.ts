// A penalty on Redis: the block lives in the key with the quota, so every process of the fleet
// refuses the blocked client, and no local denial stands in for Redis (the block grows there).
import t from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import type { Redis } from 'ioredis'
import admission from '../../../lib/index.js'
import { testingRedisBackend } from '../../../lib/backends/redis/redis-backend.js'
import { normalizePolicy, policyFingerprint } from '../../../lib/rates/policy.js'
import { counting, deleteKeys, sharedRedis, uniquePrefix } from './helpers.js'

const shared = await sharedRedis()
const skip = 'skip' in shared ? shared.skip : false
const redis = 'redis' in shared ? shared.redis : (undefined as unknown as Redis)
if (!skip) t.teardown(() => redis.quit())

const POLICY = { algorithm: 'token-bucket', limit: 1, windowMs: 1000, penalty: 'restart' } as const

t.test("'restart' on Redis: two apps of one fleet see one block; the quota alone would have admitted", { skip }, async (t) => {
  const prefix = uniquePrefix('penalty')
  t.teardown(() => deleteKeys(redis, prefix))
  const clock = { now: 1_800_000_000_000 }
  const client = counting(redis)
  const app = async (): Promise<FastifyInstance> => {
    const one = Fastify()
    await one.register(admission, { backend: testingRedisBackend({ client, prefix, timeoutMs: 10_000 }, { now: () => clock.now }), rateLimit: POLICY })
    one.get('/', async () => 'ok')
    await one.ready()
    return one
  }
  const a = await app()
  const b = await app()
  t.teardown(async () => { await a.close(); await b.close() })
  const at = async (which: FastifyInstance, ms: number): Promise<[number, string | undefined]> => {
    clock.now = 1_800_000_000_000 + ms
    const res = await which.inject('/')
    return [res.statusCode, res.headers['retry-after'] as string | undefined]
  }
  t.same(await at(a, 0), [200, undefined])
  t.same(await at(b, 1), [429, '1'], 'refused by the other app: a block to 1001')
  t.same(await at(a, 999), [429, '1'], 'asked again: blocked to 1999')
  t.same(await at(b, 1001), [429, '1'], 'the bucket has its token back, the block is not over')
  t.same(await at(a, 1999), [429, '1'], '1999: blocked again (to 2999), asked at 1001 … every ask restarts it')
  t.same(await at(b, 2999), [200, undefined], 'a whole window without asking: admitted')
  t.equal(client.calls.evalsha, 6, 'every request went to Redis: no local denial for a penalized policy (the first also loads the script)')
  const keys = await redis.keys(`${prefix}*`)
  t.equal(keys.length, 1)
  t.match(await redis.get(keys[0]!), new RegExp(`^${policyFingerprint(normalizePolicy(POLICY)).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\d+ \\d+ 0 0$`), 'the stored value: the bucket, then the block (forgotten on admission)')
})

t.test("'double' through fastify.rates on Redis: the waits double, bounded, and are honest", { skip }, async (t) => {
  const prefix = uniquePrefix('penalty-rates')
  t.teardown(() => deleteKeys(redis, prefix))
  const clock = { now: 1_800_000_000_000 }
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: false, backend: testingRedisBackend({ client: redis, prefix, timeoutMs: 10_000 }, { now: () => clock.now }) })
  await app.ready()
  const limiter = app.rates.use('exports', { algorithm: 'fixed-window', limit: 1, windowMs: 1000, penalty: { mode: 'double', maxMs: 4000 } })
  t.equal((await limiter.consume('ann')).allowed, true)
  const waits: number[] = []
  for (let i = 1; i <= 5; i++) {
    clock.now += 1
    const d = await limiter.consume('ann')
    t.equal(d.allowed, false)
    waits.push(d.allowed ? 0 : d.retryAfterMs)
  }
  t.same(waits, [1000, 2000, 4000, 4000, 4000])
  clock.now += 4000
  t.equal((await limiter.consume('ann')).allowed, true, 'at the wait said: admitted')
})
