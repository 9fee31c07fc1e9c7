// Tests that flush, pause, kill or reconfigure a server: each on a redis-server of its own, on a
// free port, killed (by its pid) at teardown. The shared server is never touched here.
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { Cluster } from 'ioredis'
import type { Policy } from '../../../lib/core/rates/index.js'
import { RatesUnavailableError } from '../../../lib/rates/errors.js'
import { DECIDE_SHA } from '../../../lib/backends/redis/decide-script.js'
import { redisBackend } from '../../../lib/backends/redis/redis-backend.js'
import { counting, keysUnder, redisServerMissing, startPrivateServer, testClient } from './helpers.js'

const skip = await redisServerMissing()
// A slow refill (a token every 3.6 s): `remaining` counts the consumed, exactly, for a few seconds.
const policy: Policy = Object.freeze({ algorithm: 'token-bucket', limit: 1000, windowMs: 3_600_000, burst: 1000 })

t.test('NOSCRIPT: after SCRIPT FLUSH the next decision falls back to EVAL once, state intact', { skip }, async (t) => {
  const server = await startPrivateServer()
  t.teardown(server.stop)
  const redis = testClient(server.url)
  await redis.connect()
  t.teardown(() => redis.disconnect())
  const client = counting(redis)
  const limiter = redisBackend({ client, timeoutMs: 2000 }).limiter('app#n', policy)

  t.match(await limiter.consume('su', 1), { allowed: true, remaining: 999 })
  t.same(client.calls, { evalsha: 1, eval: 1 }, 'a new server has no script: EVAL loads it')
  t.match(await limiter.consume('su', 1), { allowed: true, remaining: 998 })
  t.same(client.calls, { evalsha: 2, eval: 1 }, 'then EVALSHA alone')

  t.equal(await server.admin.script('FLUSH'), 'OK')
  t.same(await server.admin.script('EXISTS', DECIDE_SHA), [0], 'flushed')
  t.match(await limiter.consume('su', 1), { allowed: true, remaining: 997 }, 'the state survived the flush')
  t.same(client.calls, { evalsha: 3, eval: 2 }, 'NOSCRIPT → one EVAL')
  t.match(await limiter.consume('su', 1), { allowed: true, remaining: 996 })
  t.same(client.calls, { evalsha: 4, eval: 2 })
})

/** `decide()`, again while it is refused as "too late" (which consumed nothing), up to 20 times. */
async function resume<T> (decide: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await decide()
    } catch (error) {
      if (attempt >= 20 || !/too late/.test((error as Error).message)) throw error
      await sleep(20)
    }
  }
}

t.test('paused server (CLIENT PAUSE): every decision rejects within timeoutMs + 50 ms, then resumes', { skip }, async (t) => {
  const server = await startPrivateServer()
  t.teardown(server.stop)
  const redis = testClient(server.url)
  await redis.connect()
  t.teardown(() => redis.disconnect())
  const timeoutMs = 50
  const limiter = redisBackend({ client: redis, timeoutMs, denyCache: false }).limiter('app#p', policy)
  t.match(await limiter.consume('su', 1), { allowed: true })

  await server.admin.client('PAUSE', 300, 'ALL')
  const pausedAt = performance.now()
  const timed = await Promise.all(Array.from({ length: 20 }, async (_, i) => {
    await sleep(i * 5)
    const started = performance.now()
    const error = await limiter.consume(['su', 'sv', 'sw'][i % 3] as string, 1).then(() => undefined, (e: unknown) => e)
    return { error, elapsed: performance.now() - started }
  }))
  for (const [i, { error, elapsed }] of timed.entries()) {
    t.ok(error instanceof RatesUnavailableError, `request ${i}: RATES_UNAVAILABLE`)
    t.match(error, { code: 'RATES_UNAVAILABLE', message: /did not answer within 50 ms/ })
    t.ok(elapsed <= timeoutMs + 50, `request ${i} answered after ${elapsed.toFixed(1)} ms`)
  }
  const worst = Math.max(...timed.map(({ elapsed }) => elapsed))
  t.pass(`worst answer while paused: ${worst.toFixed(1)} ms`)

  // The pause ends; the late replies arrive (and are dropped); decisions resume on the same client.
  await sleep(Math.max(0, 300 - (performance.now() - pausedAt)) + 50)
  // On a busy machine the first call after the pause may itself run past its deadline: "too late",
  // which consumed nothing; try again then.
  const resumed = await resume(() => limiter.consume('su', 1))
  t.match(resumed, { allowed: true }, 'decisions resume without a restart')
  // The 20 timed-out calls still ran once the pause ended (a timeout is not a cancellation), but
  // past their deadline: they consumed nothing (deadline.test.ts).
  t.equal(resumed.remaining, 1000 - 2, 'su: 1 + 1 consumed, none of the 7 late ones')
})

t.test('killed server: decisions reject within timeoutMs + 50 ms; after a restart they resume', { skip }, async (t) => {
  let server = await startPrivateServer()
  t.teardown(async () => { await server.stop() })
  const redis = testClient(server.url)
  redis.on('error', () => { /* reconnecting */ })
  await redis.connect()
  t.teardown(() => redis.disconnect())
  const client = counting(redis)
  const limiter = redisBackend({ client, timeoutMs: 50 }).limiter('app#k', policy)
  t.match(await limiter.consume('su', 1), { allowed: true })

  const port = server.port
  await server.stop()
  for (let i = 0; i < 10; i++) {
    const started = performance.now()
    const error = await limiter.consume('su', 1).then(() => undefined, (e: unknown) => e)
    const elapsed = performance.now() - started
    t.ok(error instanceof RatesUnavailableError, `down ${i}: ${(error as Error).message}`)
    t.ok(elapsed <= 100, `down ${i}: answered after ${elapsed.toFixed(1)} ms`)
    await sleep(10)
  }

  server = await startPrivateServer([], port)
  let resumed: unknown
  for (let attempt = 0; attempt < 100 && resumed === undefined; attempt++) {
    resumed = await limiter.consume('su', 1).catch(async () => { await sleep(20) })
  }
  t.match(resumed, { allowed: true, remaining: 999 }, 'a new (empty) server: fresh state, script loaded by EVAL')
  t.ok(client.calls.eval >= 2, 'NOSCRIPT on the new server → EVAL')
})

t.test('Redis Cluster: decisions through a Cluster client; each key hashes by its tag {<address>:<identity>}', { skip, timeout: 60_000 }, async (t) => {
  // A one-node cluster holding every slot (its state turns ok after a couple of seconds).
  const server = await startPrivateServer(['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-announce-ip', '127.0.0.1'])
  t.teardown(server.stop)
  await server.admin.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383')
  const ok = async (): Promise<boolean> => /cluster_state:ok/.test(String(await server.admin.call('CLUSTER', 'INFO')))
  for (let i = 0; i < 300 && !(await ok()); i++) await sleep(50)
  t.ok(await ok(), 'the cluster is up')
  const cluster = new Cluster([{ host: '127.0.0.1', port: server.port }], { lazyConnect: true, redisOptions: { connectTimeout: 1000 } })
  await cluster.connect()
  t.teardown(() => cluster.disconnect())

  const prefix = 'admission:'
  const backend = redisBackend({ client: cluster, prefix, timeoutMs: 2000 })
  const identities = Array.from({ length: 24 }, (_, i) => `su${i}`).concat(['R8:tenantId3:st16:userId3:su1', 's}tail', 's{x}'])
  const limiter = backend.limiter('app/plugin#send', policy)
  for (const identity of identities) t.match(await limiter.consume(identity, 1), { allowed: true, remaining: 999 }, identity)
  const keys = await keysUnder(server.admin, prefix)
  t.same(keys, identities.map((identity) => `${prefix}{app/plugin#send:${identity}}`).sort())

  const slot = async (key: string): Promise<number> => Number(await server.admin.call('CLUSTER', 'KEYSLOT', key))
  const slots = new Set<number>()
  for (const identity of identities) {
    const key = limiter.keyOf(identity)
    // Redis hashes what lies between the first { and the next }: the address and the identity,
    // up to an identity's own } if it has one.
    const tag = `app/plugin#send:${identity}`.split('}')[0] as string
    t.equal(await slot(key), await slot(tag), `${key} hashes as ${tag}`)
    t.equal(await slot(key), await slot(`other-prefix:{${tag}}`), 'the prefix plays no part')
    slots.add(await slot(key))
  }
  t.ok(slots.size > identities.length / 2, `one limiter's identities spread over ${slots.size} slots`)
})
