// The decision's deadline: the backend tells the script the server time at which its own timeout
// fires (estimated from the server's now in the latest reply), and a script that runs at or past
// it consumes nothing and answers {3, now}. The script's side on the shared Redis (under a unique
// prefix), the backend's arguments and replies with fake clients, and a CLIENT PAUSE on a private
// redis-server (never the shared one): decisions that timed out during the pause consumed nothing.
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import type { Policy } from '../../../lib/core/rates/index.js'
import { RatesUnavailableError } from '../../../lib/rates/errors.js'
import { policyFingerprint } from '../../../lib/rates/policy.js'
import { DECIDE_LUA, DECIDE_SHA } from '../../../lib/backends/redis/decide-script.js'
import { redisBackend, testingRedisBackend, type RedisScriptClient } from '../../../lib/backends/redis/redis-backend.js'
import { deleteKeys, redisServerMissing, resume, serverNow, sharedRedis, startPrivateServer, testClient, uniquePrefix } from './helpers.js'

const fixed: Policy = Object.freeze({ algorithm: 'fixed-window', limit: 3, windowMs: 1000 })
const FP = policyFingerprint(fixed)

/** A fake client whose replies come from `reply`; every call's arguments after the key are kept. */
function fake (reply: (args: string[]) => unknown): RedisScriptClient & { args: string[][] } {
  const args: string[][] = []
  return {
    args,
    async evalsha (_sha, _numKeys, _key, ...rest) {
      args.push(rest)
      return reply(rest)
    },
    async eval () { throw new Error('unused') }
  }
}

// Both awaited before any test starts: a top-level await after a test would race the end of the file.
const shared = await sharedRedis()
const noServer = await redisServerMissing()
const skip = 'skip' in shared ? shared.skip : false
const redis = 'redis' in shared ? shared.redis : (undefined as never)
if (!skip) t.teardown(() => redis.quit())
// These tests call EVALSHA directly: the script must be on the server whatever ran before (a
// new script's SHA is on no server until something loads it).
if (!skip) await redis.script('LOAD', DECIDE_LUA)

t.test('the backend: no deadline before a server time is observed; then the server time its timeout fires at', async (t) => {
  // One test clock: the server runs 4000 ms ahead; each round trip takes 30 ms.
  const clock = { now: 1000 }
  let replies: unknown[] = []
  const client = fake(async () => {
    clock.now += 30
    return replies.shift()
  })
  const limiter = testingRedisBackend({ client, timeoutMs: 50, denyCache: false }, { now: () => clock.now }).limiter('app#d', fixed)
  replies = [[0, 1, 2, 0, 6000, 5010, 6000]]
  await limiter.consume('sx', 1)
  t.same(client.args[0], [FP, '1', '1000'], 'first call: the test time, no deadline')
  // Observed 5010 at local 1030. Sent at 1100: the server reads at least 5010 + 70; + 50.
  clock.now = 1100
  replies = [[0, 0, 0, 900, 6000, 5090, 6000, 5000, 3]]
  await limiter.consume('sx', 1)
  t.same(client.args[1], [FP, '1', '1100', String(5010 + 70 + 50)])
  // A denial carries the server's now too: observed 5090 at 1130.
  clock.now = 1200.7
  replies = [[3, 5300]]
  const late = await limiter.consume('sx', 1).catch((e: unknown) => e)
  t.same(client.args[2], [FP, '1', '1200.7', String(Math.floor(5090 + 70.7 + 50))], 'floored to the ms')
  t.ok(late instanceof RatesUnavailableError)
  t.match(late, { code: 'RATES_UNAVAILABLE', message: /too late: Redis ran the decision for "admission:\{app#d:sx\}" after its deadline \(the 50 ms timeout\); it consumed nothing/ })
  // "Too late" refreshes the observation: 5300 at 1230.7.
  clock.now = 1300.7
  replies = [[0, 1, 2, 0, 6000, 5400, 6000]]
  await limiter.consume('sx', 1)
  t.same(client.args[3], [FP, '1', '1300.7', String(5300 + 70 + 50)])

  // Replies that look like "too late" but are not are not understood.
  for (const reply of [[3], [3, '5'], [3, 1.5], [3, 1, 2]]) {
    replies = [reply]
    t.match(await limiter.consume('sx', 1).catch((e: unknown) => e), { code: 'RATES_UNAVAILABLE', message: /unexpected reply/ }, JSON.stringify(reply))
  }
})

t.test('the backend in production: the fingerprint and cost, then \'\' and the deadline', async (t) => {
  const client = fake(async () => [0, 1, 2, 0, 6000, 5000, 6000])
  const limiter = redisBackend({ client, timeoutMs: 50, denyCache: false }).limiter('app#d', fixed)
  await limiter.consume('sx', 1)
  await limiter.consume('sx', 2)
  t.same(client.args[0], [FP, '1'], 'no deadline before a server time is observed')
  const [fp, cost, time, deadline] = client.args[1] as [string, string, string, string]
  t.same([fp, cost, time], [FP, '2', ''])
  // 5000 plus the local time between the first reply and the second call (a few ms), plus 50.
  t.ok(Number(deadline) >= 5050 && Number(deadline) < 5050 + 1000, `deadline ${deadline}`)
})

// ---- the script ---------------------------------------------------------------------------------

t.test('the script: at or past the deadline it reads and writes nothing and answers {3, now}', { skip }, async (t) => {
  const prefix = uniquePrefix('deadline')
  t.teardown(() => deleteKeys(redis, prefix))
  const key = `${prefix}{app#d:s}`
  t.same(await redis.evalsha(DECIDE_SHA, 1, key, FP, '1', '1500', '1500'), [3, 1500], 'at the deadline: too late')
  t.equal(await redis.exists(key), 0, 'nothing written')
  t.same(await redis.evalsha(DECIDE_SHA, 1, key, FP, '1', '1500', '1501'), [0, 1, 2, 0, 2000, 1500, 2000], 'before it: decided (more when the window ends)')
  t.same(await redis.evalsha(DECIDE_SHA, 1, key, FP, '3', '1600', '1200'), [3, 1600])
  t.equal(await redis.get(key), `${FP} 1000 1`, 'the state is as it was')

  // On the server's clock ('' for the test time).
  const now = await serverNow(redis)
  const [code, at] = await redis.evalsha(DECIDE_SHA, 1, key, FP, '1', '', String(now)) as [number, number]
  t.same([code, at >= now], [3, true])
  t.match(await redis.evalsha(DECIDE_SHA, 1, key, FP, '1', '', String(now + 60_000)), [0, 1])
  await t.rejects(redis.evalsha(DECIDE_SHA, 1, key, FP, '1', '', 'soon'), /bad arguments/)
  await t.rejects(redis.evalsha(DECIDE_SHA, 1, key, FP, '1', '', ''), /bad arguments/)
})

// ---- CLIENT PAUSE on a private server ----------------------------------------------------------

t.test('CLIENT PAUSE: decisions that timed out during the pause consumed nothing once it ended', { skip: noServer }, async (t) => {
  const server = await startPrivateServer()
  t.teardown(server.stop)
  const redis = testClient(server.url)
  await redis.connect()
  t.teardown(() => redis.disconnect())
  // A slow refill (a token every 3.6 s): the stored state moves only by what is consumed.
  const policy: Policy = { algorithm: 'token-bucket', limit: 1000, windowMs: 3_600_000, burst: 1000 }
  const timeoutMs = 50
  const backend = redisBackend({ client: redis, timeoutMs, denyCache: false })
  const limiter = backend.limiter('app#p', policy)
  // Again while a busy machine lets the short timeout end it first (the state is read after).
  t.match(await resume(() => limiter.consume('su', 1)), { allowed: true }, 'a reply: the server time is observed')
  const before = await redis.get(limiter.keyOf('su'))
  // A backend that has not seen a reply yet sends no deadline: its late call still consumes.
  const unobserved = redisBackend({ client: redis, timeoutMs, denyCache: false }).limiter('app#p', policy)

  await server.admin.client('PAUSE', 1000, 'ALL')
  const calls = [
    ...Array.from({ length: 9 }, async (_, i) => {
      await sleep(i * 5)
      return limiter.consume(['su', 'sv', 'sw'][i % 3] as string, 1 + (i % 2)).then(() => undefined, (e: unknown) => e)
    }),
    unobserved.consume('sx', 1).then(() => undefined, (e: unknown) => e)
  ]
  for (const [i, error] of (await Promise.all(calls)).entries()) {
    t.match(error, { code: 'RATES_UNAVAILABLE', message: /did not answer within 50 ms/ }, `call ${i} timed out`)
  }
  // Once the pause ends the blocked calls run, in order, before this PING on the same connection.
  t.equal(await redis.ping(), 'PONG')
  t.equal(await redis.get(limiter.keyOf('su')), before, 'su: the state is unchanged')
  t.equal(await redis.exists(limiter.keyOf('sv'), limiter.keyOf('sw')), 0, 'sv, sw: nothing stored')
  const evalshas = Number(/cmdstat_evalsha:calls=(\d+)/.exec(String(await redis.info('commandstats')))?.[1])
  t.ok(evalshas >= 10, `the late calls did run (${evalshas} EVALSHA)`)
  t.match(await redis.get(limiter.keyOf('sx')), /^token-bucket:1000:3600000:1000 3596400000 \d+$/, 'without a deadline the late call consumed')
  // On a busy machine this call may itself run past its deadline ("too late", nothing consumed).
  let resumed: unknown
  for (let attempt = 0; attempt < 20 && resumed === undefined; attempt++) {
    resumed = await limiter.consume('su', 1).catch(async (error: unknown) => {
      if (!/too late/.test((error as Error).message)) throw error
      await sleep(20)
    })
  }
  t.match(resumed, { allowed: true }, 'decisions resume')
})
