// Tests that flush, pause, kill or reconfigure a server: each on a redis-server of its own, on a
// free port, killed (by its pid) at teardown. The shared server is never touched here.
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { Cluster } from 'ioredis'
import type { Policy } from '../../../lib/core/rates/index.js'
import { RatesUnavailableError } from '../../../lib/rates/errors.js'
import { DECIDE_SHA } from '../../../lib/backends/redis/decide-script.js'
import { redisBackend } from '../../../lib/backends/redis/redis-backend.js'
import { counting, keysUnder, redisServerMissing, resume, startPrivateServer, testClient, until } from './helpers.js'

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

t.test('paused server (CLIENT PAUSE): every decision rejects by the backend\'s timer while paused, then decisions resume', { skip }, async (t) => {
  const server = await startPrivateServer()
  t.teardown(server.stop)
  const redis = testClient(server.url)
  await redis.connect()
  t.teardown(() => redis.disconnect())
  const client = counting(redis)
  const timeoutMs = 50
  const limiter = redisBackend({ client, timeoutMs, denyCache: false }).limiter('app#p', policy)
  // The same quota (same prefix and address), with a timeout no busy machine reaches: for the
  // decisions that must come from Redis.
  const patient = redisBackend({ client, timeoutMs: 10_000, denyCache: false }).limiter('app#p', policy)
  // The first decision through the short-timeout backend: from its reply it knows the server's
  // clock, so it sends every later decision with a deadline (deadline.test.ts). On an identity of
  // its own: a try that timed out may still consume once the server gets to it.
  t.match(await resume(() => limiter.consume('warm', 1)), { allowed: true })

  // The pause is in effect once OK comes back; it ends when the admin's PING is answered (ALL
  // pauses that connection too). 2 s: forty times the timeout, so even a slow machine's timers
  // fire well inside it.
  t.equal(await server.admin.client('PAUSE', 2000, 'ALL'), 'OK')
  let paused = true
  const first = client.log.length
  const unpaused = server.admin.ping().then((pong) => { paused = false; return pong })
  const outcomes = await Promise.all(Array.from({ length: 20 }, async (_, i) => {
    const identity = ['su', 'sv', 'sw'][i % 3] as string
    const error = await limiter.consume(identity, 1).then(() => undefined, (e: unknown) => e)
    // What was true when this decision settled.
    return { error, whilePaused: paused, callPending: client.log[first + i]?.settled === false }
  }))
  for (const [i, { error, whilePaused, callPending }] of outcomes.entries()) {
    t.ok(error instanceof RatesUnavailableError, `request ${i}: RATES_UNAVAILABLE`)
    t.match(error, { code: 'RATES_UNAVAILABLE', message: /did not answer within 50 ms/ }, `request ${i}: the timeout`)
    t.ok(callPending, `request ${i}: the client was still waiting for the server: the backend's timer ended it`)
    t.ok(whilePaused, `request ${i}: rejected while the server was still paused`)
  }
  t.equal(client.pending(), 20, 'all 20 calls still wait for the paused server')

  // The pause ends; the late replies arrive (and are dropped); decisions resume on the same client.
  t.equal(await unpaused, 'PONG')
  const resumed = await patient.consume('su', 1)
  t.match(resumed, { allowed: true }, 'decisions resume without a restart')
  t.equal(client.pending(), 0, 'the 20 late replies came (before the one sent after them on the same connection)')
  // The 20 timed-out calls still ran once the pause ended (a timeout is not a cancellation), but
  // past their deadline: they consumed nothing.
  t.equal(resumed.remaining, 1000 - 1, 'su: the one after the pause consumed, none of the 7 late ones')
})

t.test('killed server: decisions reject with RATES_UNAVAILABLE; after a restart they resume', { skip }, async (t) => {
  let server = await startPrivateServer()
  t.teardown(async () => { await server.stop() })
  const redis = testClient(server.url)
  redis.on('error', () => { /* reconnecting */ })
  await redis.connect()
  t.teardown(() => redis.disconnect())
  const client = counting(redis)
  const limiter = redisBackend({ client, timeoutMs: 50 }).limiter('app#k', policy)
  t.match(await resume(() => limiter.consume('su', 1)), { allowed: true })

  const port = server.port
  await server.stop()
  for (let i = 0; i < 10; i++) {
    const error = await limiter.consume('su', 1).then(() => undefined, (e: unknown) => e)
    // Either the backend's timer or the client's own failure (ioredis gives up on a command after
    // a failed reconnection): never an answer, never a hang.
    t.ok(error instanceof RatesUnavailableError, `down ${i}: ${(error as Error).message}`)
    t.match((error as Error).message, /did not answer within 50 ms|Redis failed: /, `down ${i}`)
  }
  // Once ioredis has given up on every queued command, none can still run on the next server.
  await until(() => client.pending() === 0)

  server = await startPrivateServer([], port)
  const patient = redisBackend({ client, timeoutMs: 10_000 }).limiter('app#k', policy)
  let resumed: unknown
  for (let attempt = 0; attempt < 100 && resumed === undefined; attempt++) {
    resumed = await patient.consume('su', 1).catch(async () => { await sleep(20) })
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
