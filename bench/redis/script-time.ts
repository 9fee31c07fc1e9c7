// Redis's own time per decision: this plugin's script against @fastify/rate-limit's, each with the
// same random keys, on a private redis-server (so the counters are ours alone), read from
// `INFO commandstats`. Redis's CPU is what a shared quota costs the Redis host, and on a machine
// where Redis shares the cores with the app it also bounds the HTTP throughput.
// `node --import tsx bench/redis/script-time.ts`: prints one JSON line (RedisCostResult). The
// micro-benchmarks of `npm run bench` run it; `npm run bench:redis` (run.ts) measures far more.
import { createRequire } from 'node:module'
import { Redis } from 'ioredis'
import { DECIDE_LUA, DECIDE_SHA } from '../../lib/backends/redis/decide-script.js'
import { policyFingerprint } from '../../lib/rates/policy.js'
import { startPrivateServer } from '../../test/backends/redis/helpers.js'
import { countersBetween, readCounters, scriptCounters } from './redis-info.js'

export interface RedisCostResult {
  decisions: number
  keys: number
  /** Microseconds of Redis CPU per call, as Redis counts them (`usec_per_call`). */
  admissionUsecPerCall: number
  rateLimitUsecPerCall: number
}

/** @fastify/rate-limit's Redis store, as its plugin calls it (the package types only the plugin). */
interface RedisStoreLike {
  incr (key: string, cb: (error: Error | null, result?: unknown) => void, timeWindow: number, max: number): void
}
const RedisStore = createRequire(import.meta.url)('@fastify/rate-limit/store/RedisStore.js') as new (continueExceeding: boolean, exponentialBackoff: boolean, redis: Redis, key: string) => RedisStoreLike

const DECISIONS = 50_000
const KEYS = 10_000
const BATCH = 100

/** Redis's microseconds per script call (EVALSHA, and EVAL if any) over DECISIONS decisions. */
async function measure (client: Redis, decide: (key: string) => Promise<unknown>): Promise<number> {
  const before = await readCounters(client)
  for (let i = 0; i < DECISIONS; i += BATCH) {
    const batch: Array<Promise<unknown>> = []
    for (let j = i; j < i + BATCH; j++) batch.push(decide(`10.0.${(j % KEYS) >> 8}.${(j % KEYS) & 255}`))
    await Promise.all(batch)
  }
  const script = scriptCounters(countersBetween(before, await readCounters(client)))
  return script.usec / script.calls
}

const server = await startPrivateServer()
try {
  const client = new Redis(server.url)
  // The gate's default shape in the HTTP benchmark: a token bucket, 1e9 per minute.
  const fingerprint = policyFingerprint({ algorithm: 'token-bucket', limit: 1e9, windowMs: 60_000 })
  await client.script('LOAD', DECIDE_LUA)
  const admission = await measure(client, (key) => client.evalsha(DECIDE_SHA, 1, `admission:{bench#admission:*:S${key.length}:${key}}`, fingerprint, '1'))
  const store = new RedisStore(false, false, client, 'rl:')
  // Its first call loads the script (EVALSHA falls back to EVAL once); not counted.
  await new Promise((resolve, reject) => { store.incr('warm', (error) => { error === null ? resolve(undefined) : reject(error) }, 60_000, 1e9) })
  const rateLimit = await measure(client, (key) => new Promise((resolve, reject) => {
    store.incr(key, (error, result) => { error === null ? resolve(result) : reject(error) }, 60_000, 1e9)
  }))
  client.disconnect()
  const out: RedisCostResult = { decisions: DECISIONS, keys: KEYS, admissionUsecPerCall: admission, rateLimitUsecPerCall: rateLimit }
  process.stdout.write(JSON.stringify(out) + '\n')
} finally {
  await server.stop()
}
