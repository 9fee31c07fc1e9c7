// The stack script against the shared Redis (under unique prefixes, keys deleted afterwards): the
// differential test against the memory backend's stack (random stacks of one to three policies of
// all four algorithms, consumes and checks, refusals), all or nothing read back from the keys,
// TTLs, conflicts (keys swapped between policies too), corrupt states and keys of the wrong type,
// the deadline and the arguments; the key layout's one hash slot (computed, and on a
// cluster-enabled private redis-server of our own: CLUSTER KEYSLOT, and no CROSSSLOT from it, with
// ioredis and node-redis); decisions that timed out during a CLIENT PAUSE of a private server
// consumed nothing.
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import t, { type Test } from 'tap'
import fc from 'fast-check'
import { Cluster, type Redis } from 'ioredis'
import { createClient } from 'redis'
import type { Algorithm, Policy } from '../../../lib/core/rates/index.js'
import type { StackDecision } from '../../../lib/rates/decision.js'
import { capacityOf, normalizePolicy, policyFingerprint } from '../../../lib/rates/policy.js'
import { MemoryBackend } from '../../../lib/backends/memory/memory-backend.js'
import type { MemoryBackendStack } from '../../../lib/backends/memory/memory-stack.js'
import { DECIDE_STACK_LUA, DECIDE_STACK_SHA } from '../../../lib/backends/redis/decide-stack-script.js'
import { redisBackend, testingRedisBackend, type RedisBackendClient } from '../../../lib/backends/redis/redis-backend.js'
import type { RedisBackendStack } from '../../../lib/backends/redis/redis-stack.js'
import { recoveryMs } from '../../../lib/backends/redis/stored-state.js'
import { windowAround } from './children.js'
import { deleteKeys, freePort, keysUnder, redisServerMissing, resume, serverNow, sharedRedis, startPrivateServer, testClient, uniquePrefix, type PrivateServer } from './helpers.js'

const ALGORITHMS: readonly Algorithm[] = ['token-bucket', 'fixed-window', 'sliding-window-counter', 'gcra']
// Timeouts are tested with a private server (below); here a busy machine must not fail a test.
const SLOW = 10_000
const hasBurst = (algorithm: Algorithm): boolean => algorithm === 'token-bucket' || algorithm === 'gcra'

// Awaited before any test starts: a top-level await after a test would race the end of the file.
const shared = await sharedRedis()
const noServer = await redisServerMissing()
const skip = 'skip' in shared ? shared.skip : false
const redis = 'redis' in shared ? shared.redis : (undefined as never)
if (!skip) t.teardown(() => redis.quit())
// Some tests call EVALSHA directly: the script must be on the server.
if (!skip) await redis.script('LOAD', DECIDE_STACK_LUA)
// A window (of an hour or more) that the tests on the server clock run inside, whatever the time.
const W = skip ? 3_600_000 : windowAround(await serverNow(redis), 300_000)

function withPrefix (t: Test, label: string): string {
  const prefix = uniquePrefix(label)
  t.teardown(async () => { await deleteKeys(redis, prefix) })
  return prefix
}

/** The value (a number -0 as 0, as Redis's integer replies have it), for deep equality. */
function plain (value: unknown): unknown {
  if (typeof value === 'number') return value + 0
  if (Array.isArray(value)) return value.map(plain)
  if (typeof value === 'object' && value !== null) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]))
  return value
}

// ---- the differential test against the memory stack ---------------------------------------------

function policyArb (algorithm: Algorithm): fc.Arbitrary<Readonly<Policy>> {
  const limit = fc.oneof(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 30 }))
  const windowMs = fc.oneof(fc.integer({ min: 1, max: 10 }), fc.integer({ min: 1, max: 2_000 }), fc.constantFrom(1_000, 60_000, 3_600_000))
  const burst = fc.option(fc.integer({ min: 1, max: 40 }), { nil: undefined })
  return fc.record({ limit, windowMs, burst }).map(({ limit, windowMs, burst }) =>
    normalizePolicy(hasBurst(algorithm) && burst !== undefined ? { algorithm, limit, windowMs, burst } : { algorithm, limit, windowMs }))
}

/** A consume or a check of `cost`, or (with `units`) a charge of that many units. */
interface Op { readonly dt: number, readonly who: number, readonly cost: number, readonly check: boolean, readonly units?: number }
interface Scenario { readonly policies: readonly Readonly<Policy>[], readonly t0: number, readonly ops: readonly Op[] }

/**
 * One to three policies of any algorithms; time mostly forward at the scale of the shortest and of
 * the longest window, sometimes back; identities from a pool of three; costs up to the least
 * capacity; a quarter of the calls checks; one call in five a charge (up to the largest capacity,
 * taken or returned: debts, clamped per policy).
 */
const scenarioArb: fc.Arbitrary<Scenario> = fc.array(fc.constantFrom(...ALGORITHMS), { minLength: 1, maxLength: 3 })
  .chain((algorithms) => fc.tuple(...algorithms.map(policyArb)))
  .chain((policies) => {
    const windows = policies.map((p) => p.windowMs)
    const short = Math.min(...windows)
    const long = Math.max(...windows)
    const cap = Math.min(...policies.map(capacityOf))
    const most = Math.max(...policies.map(capacityOf))
    return fc.record({
      policies: fc.constant(policies),
      t0: fc.oneof(fc.integer({ min: 0, max: 1_000_000 }), fc.integer({ min: 1_800_000_000_000, max: 1_801_000_000_000 })),
      ops: fc.array(fc.record({
        dt: fc.oneof(
          { weight: 3, arbitrary: fc.constant(0) },
          { weight: 4, arbitrary: fc.integer({ min: 0, max: Math.max(1, Math.ceil(short / 2)) }) },
          { weight: 2, arbitrary: fc.integer({ min: 0, max: 3 * short }) },
          { weight: 2, arbitrary: fc.integer({ min: 0, max: Math.max(1, Math.ceil(long / 2)) }) },
          { weight: 1, arbitrary: fc.integer({ min: 0, max: 3 * long }) },
          { weight: 1, arbitrary: fc.integer({ min: -2 * short, max: -1 }) }
        ),
        who: fc.integer({ min: 0, max: 2 }),
        cost: fc.oneof(fc.integer({ min: 1, max: Math.min(2, cap) }), fc.integer({ min: 1, max: cap })),
        check: fc.oneof({ weight: 3, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
        units: fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.integer({ min: -most, max: most }) }),
        // The same request again at once: what a refused client does.
        again: fc.boolean()
      }), { minLength: 1, maxLength: 14 })
    }).map(({ policies, t0, ops }) => ({
      policies,
      t0,
      ops: ops.flatMap(({ again, units, ...op }) => {
        const first = units === undefined ? op : { ...op, units }
        return again ? [first, { ...op, dt: 0 }] : [first]
      })
    }))
  })

let runs = 0
const seen = { decisions: 0, refused: 0, partial: 0, checks: 0, charges: 0, stacks: new Set<string>() }

/**
 * Drives a scenario through the memory backend's stack (the reference) and the Redis stack, both on
 * the test clock (the script takes it as its time). Every decision field, per policy too, must be
 * equal, and so must every policy's stored state after each call (a refusal or a check stores
 * nothing, on either). A clock that steps back does so by less than the shortest recovery time
 * below the latest time seen: the script trusts every stored state then (beyond that, it would
 * decide as the worst state, which memory has no notion of; the single-key differential covers it).
 */
async function differential (redisStack: RedisBackendStack, memoryStack: MemoryBackendStack, clock: { now: number }, s: Scenario): Promise<void> {
  const floor = Math.min(...s.policies.map(recoveryMs))
  let now = s.t0
  let latest = now
  for (const [i, { dt, who, cost, check, units }] of s.ops.entries()) {
    now = Math.max(0, latest - floor + 1, now + dt)
    latest = Math.max(latest, now)
    clock.now = now
    const identity = `sid${who}`
    const call = units !== undefined ? 'charge' : check ? 'check' : 'consume'
    const amount = units ?? cost
    const expected = plain(await memoryStack[call](identity, amount)) as StackDecision
    const got = await redisStack[call](identity, amount)
    assert.deepEqual(got, expected, `op ${i} at ${now}: ${call} ${identity} ${amount}`)
    if (units !== undefined) seen.charges++
    assert.deepEqual(plain(await redisStack.state(identity)), plain(await memoryStack.state(identity)), `states after op ${i}`)
    seen.decisions++
    if (check) seen.checks++
    if (!expected.allowed) seen.refused++
    if (!expected.allowed && expected.policies.some((p) => p.allowed)) seen.partial++
  }
}

t.test('differential: the Redis stack decides and stores as the memory stack', { skip }, async (t) => {
  const prefix = withPrefix(t, 'stack-diff')
  const clock = { now: 0 }
  const backend = testingRedisBackend({ client: redis, prefix, timeoutMs: SLOW }, { now: () => clock.now })
  const memory = new MemoryBackend({ clock: () => clock.now })
  await fc.assert(fc.asyncProperty(scenarioArb, async (s) => {
    const address = `diff/${runs++}`
    for (const p of s.policies) seen.stacks.add(p.algorithm)
    await differential(backend.stack(address, s.policies), memory.stack(address, s.policies), clock, s)
  }), { numRuns: 150 })
  t.pass(`${seen.decisions} decisions alike (${seen.checks} checks, ${seen.charges} charges, ${seen.refused} refused, ${seen.partial} of them with a policy that had room), states too`)
  t.same([...seen.stacks].sort(), [...ALGORITHMS].sort(), 'every algorithm took part')
  t.ok(seen.partial > 0 && seen.checks > 0, 'partial refusals and checks happened')
})

// ---- all or nothing, TTLs ------------------------------------------------------------------------

const twice: Policy = Object.freeze({ algorithm: 'fixed-window', limit: 2, windowMs: W })
const bucket: Policy = Object.freeze({ algorithm: 'token-bucket', limit: 10, windowMs: 60_000, burst: 5 })

/** Each key's value and absolute expiry (ms; -1 none, -2 no key). */
async function snapshot (keys: string[]): Promise<Array<[string | null, number]>> {
  return Promise.all(keys.map(async (key) => [await redis.get(key), await redis.pexpiretime(key)] as [string | null, number]))
}

t.test('all or nothing: a refusal writes nothing under any policy; a check writes nothing at all', { skip }, async (t) => {
  const prefix = withPrefix(t, 'stack-aon')
  const stack = redisBackend({ client: redis, prefix, timeoutMs: SLOW }).stack('app#s', [twice, bucket])
  const keys = stack.keysOf('su')
  t.same(keys, [`${prefix}{app#s:su}/0`, `${prefix}{app#s:su}/1`])

  t.match(await stack.check('su', 2), { allowed: true, remaining: 2, policies: [{ allowed: true, remaining: 2 }, { allowed: true, remaining: 5 }] }, 'a check on a new identity: its state as it stands')
  t.same(await keysUnder(redis, prefix), [], 'a check stores nothing')
  const first = await stack.consume('su', 2)
  t.match(first, { allowed: true, remaining: 0, policies: [{ allowed: true, remaining: 0 }, { allowed: true, remaining: 3 }] })
  const stored = await snapshot(keys)
  t.match(stored, [[new RegExp(`^fixed-window:2:${W} \\d+ 2$`), Number], [/^token-bucket:10:60000:5 180000 \d+$/, Number]])
  t.ok(stored.every(([, at]) => at > 0), 'both keys have an expiry')

  // The window is spent: the stack refuses, and the bucket, which had room, keeps its 3 tokens.
  const refused = await stack.consume('su', 1)
  t.match(refused, { allowed: false, remaining: 0, policies: [{ allowed: false, remaining: 0 }, { allowed: true, retryAfterMs: 0, remaining: 3 }] })
  t.equal(refused.policies[1]?.resetAt, first.policies[1]?.resetAt, "the bucket's outcome: its state as it stands (full at the same tick)")
  t.equal(refused.allowed ? 0 : refused.retryAfterMs, refused.policies[0]?.retryAfterMs)
  t.same(await snapshot(keys), stored, 'neither key changed, value or expiry')
  const checked = await stack.check('su', 1)
  t.same([checked.allowed, checked.remaining, checked.policies.map((p) => [p.allowed, p.remaining])], [false, 0, [[false, 0], [true, 3]]], 'a check says the same')
  t.same(await snapshot(keys), stored)

  // One policy's key missing, the other refusing: the missing one stays missing.
  await redis.del(keys[1]!)
  const again = await stack.consume('su', 1)
  t.match(again, { allowed: false, policies: [{ allowed: false }, { allowed: true, remaining: 5 }] })
  const now = await serverNow(redis)
  t.ok((again.policies[1]?.resetAt ?? 0) <= now && (again.policies[1]?.resetAt ?? 0) >= now - 1000, 'a missing key is full now')
  t.same(await snapshot(keys), [stored[0], [null, -2]])
  t.same(await stack.state('su'), [{ start: Number(stored[0]?.[0]?.split(' ')[1]), count: 2 }, undefined])
})

t.test('TTL: each key expires at its own full recovery; a refusal or a check sets only a missing TTL', { skip }, async (t) => {
  const prefix = withPrefix(t, 'stack-ttl')
  const policies: Policy[] = [
    { algorithm: 'fixed-window', limit: 2, windowMs: 250 },
    { algorithm: 'token-bucket', limit: 10, windowMs: 1000, burst: 5 },
    { algorithm: 'sliding-window-counter', limit: 3, windowMs: 125 },
    { algorithm: 'gcra', limit: 4, windowMs: 1000, burst: 2 }
  ]
  const stack = redisBackend({ client: redis, prefix, timeoutMs: SLOW }).stack('app#ttl', policies)
  const keys = stack.keysOf('sttl')
  const d = await stack.consume('sttl', 2)
  t.ok(d.allowed)
  for (const [i, key] of keys.entries()) {
    // The server's time and the TTL read at one instant (MULTI): however long the test waited,
    // the key expires at its recovery, to the millisecond (or has, once that is past).
    const [[, time], [, ttl]] = await redis.multi().time().pttl(key).exec() as [[null, [string, string]], [null, number]]
    const now = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000)
    const resetAt = d.policies[i]?.resetAt ?? 0
    t.ok(ttl === -2 ? now >= resetAt : Math.abs(ttl - (resetAt - now)) <= 1, `${policies[i]?.algorithm}: PTTL ${ttl} at ${now}, recovery at ${resetAt}`)
  }
  const latest = Math.max(...d.policies.map((p) => p.resetAt))
  while (await serverNow(redis) <= latest) await sleep(20)
  t.same(await keysUnder(redis, prefix), [], 'every key gone once recovered')

  // A refusal: without a TTL a key gets one again, ending at the recovery of its state as it
  // stands; a check too.
  const long = redisBackend({ client: redis, prefix, timeoutMs: SLOW }).stack('app#long', [twice, bucket])
  const first = await long.consume('sl', 2)
  for (const key of long.keysOf('sl')) await redis.persist(key)
  t.match(await long.consume('sl', 1), { allowed: false, policies: [{ allowed: false }, { allowed: true }] })
  for (const [i, key] of long.keysOf('sl').entries()) {
    const expireAt = await redis.pexpiretime(key)
    const recovers = first.policies[i]?.resetAt ?? 0
    t.ok(expireAt >= recovers - 1 && expireAt <= recovers + 50, `policy ${i}: expires at ${expireAt}, its state's recovery ${recovers}`)
  }
  await redis.persist(long.keysOf('sl')[1]!)
  await long.check('sl', 1)
  const expireAt = await redis.pexpiretime(long.keysOf('sl')[1]!)
  t.ok(expireAt >= (first.policies[1]?.resetAt ?? 0) - 1 && expireAt <= (first.policies[1]?.resetAt ?? 0) + 50, 'a check sets a missing TTL too')
})

// ---- one hash slot --------------------------------------------------------------------------------

/** CRC16-CCITT (XMODEM), as Redis Cluster hashes keys. */
function crc16 (bytes: Uint8Array): number {
  let crc = 0
  for (const byte of bytes) {
    crc ^= byte << 8
    for (let i = 0; i < 8; i++) crc = (crc & 0x8000) !== 0 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
  }
  return crc
}

/** The cluster slot of `key`: its hash tag's (the first `{…}` with something inside), else its own. */
function keySlot (key: string): number {
  const open = key.indexOf('{')
  if (open !== -1) {
    const close = key.indexOf('}', open + 1)
    if (close > open + 1) key = key.slice(open + 1, close)
  }
  return crc16(Buffer.from(key)) % 16384
}

const IDENTITIES = ['salice', 'R8:tenantId3:st16:userId3:su1', 's}{', 's{x}', '}', 'sé€😀', 's:' + 'x'.repeat(300)]

t.test('one hash slot: every key of an identity\'s stack, whatever the identity; identities spread', async (t) => {
  t.equal(crc16(Buffer.from('123456789')), 0x31c3, 'the CRC16 check value')
  const stack = redisBackend({ client: { evalsha: async () => null, eval: async () => null } }).stack('app/plugin~1#send%20mail', [twice, bucket, twice, bucket])
  for (const identity of IDENTITIES) {
    const slots = stack.keysOf(identity).map(keySlot)
    t.equal(new Set(slots).size, 1, `${JSON.stringify(identity)}: slot ${slots[0]}`)
  }
  const spread = new Set(Array.from({ length: 50 }, (_, i) => keySlot(stack.keysOf(`s${i}`)[0]!)))
  t.ok(spread.size > 40, `50 identities on ${spread.size} slots`)
})

/** A one-node Redis Cluster of our own (all 16384 slots): it checks every script's keys for one slot. */
async function startOneNodeCluster (t: Test): Promise<PrivateServer> {
  const port = await freePort()
  const bus = await freePort()
  // Announced: alone, a node does not know its own address, and CLUSTER SLOTS would give none
  // (ioredis's Cluster then never connects).
  const server = await startPrivateServer(['--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`, '--cluster-port', String(bus), '--cluster-announce-ip', '127.0.0.1'], port)
  t.teardown(server.stop)
  await server.admin.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383')
  while (!/cluster_state:ok/.test(String(await server.admin.call('CLUSTER', 'INFO')))) await sleep(20)
  return server
}

t.test('a cluster-enabled server: CLUSTER KEYSLOT agrees, no CROSSSLOT, ioredis (Redis and Cluster) and node-redis', { skip: noServer }, async (t) => {
  const server = await startOneNodeCluster(t)
  const admin = server.admin
  const probe = redisBackend({ client: admin }).stack('app#slot', [twice, bucket, twice])
  for (const identity of IDENTITIES) {
    const slots = await Promise.all(probe.keysOf(identity).map(async (key) => Number(await admin.call('CLUSTER', 'KEYSLOT', key))))
    t.same(slots, probe.keysOf(identity).map(keySlot), `${JSON.stringify(identity)}: the server's slots are the computed ones`)
  }
  // The server does refuse a script on keys of two slots.
  await t.rejects(admin.eval('return 1', 2, 'a', 'b'), /CROSSSLOT/)

  const cluster = new Cluster([{ host: '127.0.0.1', port: server.port }], { lazyConnect: true, redisOptions: { connectTimeout: 1000 } })
  await cluster.connect()
  t.teardown(() => cluster.disconnect())
  const node = createClient({ url: server.url, socket: { connectTimeout: 1000, reconnectStrategy: false } })
  node.on('error', () => { /* the test fails on the call instead */ })
  await node.connect()
  t.teardown(() => node.destroy())
  for (const [name, client] of [['ioredis', admin], ['ioredis Cluster', cluster], ['node-redis', node]] as Array<[string, RedisBackendClient]>) {
    const stack = redisBackend({ client, prefix: `${name.replace(/ /g, '-')}:`, timeoutMs: SLOW }).stack('app#slot', [twice, bucket])
    for (const identity of IDENTITIES) {
      t.match(await stack.consume(identity, 2), { allowed: true, remaining: 0 }, `${name}, ${JSON.stringify(identity)}`)
      t.match(await stack.check(identity, 1), { allowed: false, policies: [{ allowed: false }, { allowed: true, remaining: 3 }] })
      t.match(await stack.state(identity), [{ count: 2 }, { tokens: 180_000 }])
      t.equal(await stack.delete(identity), true)
      t.equal(await stack.delete(identity), false)
    }
  }
})

// ---- conflicts, corrupt states ------------------------------------------------------------------

t.test('a key of the stack under another policy: conflict, and nothing written under any policy', { skip }, async (t) => {
  const prefix = withPrefix(t, 'stack-conflict')
  const gcra: Policy = { algorithm: 'gcra', limit: 5, windowMs: 60_000, burst: 2 }
  const a = redisBackend({ client: redis, prefix, timeoutMs: SLOW }).stack('app#c', [twice, bucket])
  const b = redisBackend({ client: redis, prefix, timeoutMs: SLOW }).stack('app#c', [twice, gcra])
  await a.consume('su', 1)
  const keys = a.keysOf('su')
  const before = await snapshot(keys)
  const error = await b.consume('su', 1).catch((e: unknown) => e)
  t.match(error, { code: 'RATES_POLICY_CONFLICT', limiterName: 'app#c', existing: bucket, requested: gcra })
  t.same(await snapshot(keys), before, 'neither key changed: not even the first, whose policy is the same')
  // The first key missing: still nothing written.
  await redis.del(keys[0]!)
  t.match(await b.check('su', 1).catch((e: unknown) => e), { code: 'RATES_POLICY_CONFLICT' })
  t.match(await b.consume('su', 1).catch((e: unknown) => e), { code: 'RATES_POLICY_CONFLICT' })
  t.equal(await redis.exists(keys[0]!), 0)
  t.match(await b.state('su').catch((e: unknown) => e), { code: 'RATES_POLICY_CONFLICT', existing: bucket })
  t.match(await b.delete('su').catch((e: unknown) => e), { code: 'RATES_POLICY_CONFLICT', existing: bucket })
  t.same(await snapshot(keys), [[null, -2], before[1]], 'a delete that conflicts deletes nothing')
  // A key without a TTL holding another policy gets the caller's recovery time, as the single script gives it.
  await redis.persist(keys[1]!)
  await b.consume('su', 1).catch(() => undefined)
  t.ok(await redis.pttl(keys[1]!) > 0)
  // Something else in a key: unavailable, never a reset.
  await redis.set(keys[1]!, 'hello world')
  t.match(await a.consume('su', 1).catch((e: unknown) => e), { code: 'RATES_UNAVAILABLE', message: /the key ".*\/1" holds a value this backend did not write/ })
  t.equal(await redis.get(keys[1]!), 'hello world')
  // Beside it, a key of the wrong type: corrupt state (see below), not what is answered.
  await redis.hset(keys[0]!, 'x', '1')
  t.match(await a.consume('su', 1).catch((e: unknown) => e), { code: 'RATES_UNAVAILABLE', message: /the key ".*\/1" holds a value this backend did not write/ })
  t.equal(await redis.get(keys[1]!), 'hello world')
  t.match(await a.state('su').catch((e: unknown) => e), { code: 'RATES_UNAVAILABLE', message: /the key ".*\/1" holds a value this backend did not write/ })
})

t.test('a corrupt state is decided as the worst legitimate one, stored so (refusal or check); the others untouched', { skip }, async (t) => {
  const prefix = withPrefix(t, 'stack-corrupt')
  const stack = redisBackend({ client: redis, prefix, timeoutMs: SLOW }).stack('app#x', [twice, bucket])
  const keys = stack.keysOf('su')
  await stack.consume('su', 1)
  const bucketBefore = await snapshot([keys[1]!])
  await redis.set(keys[0]!, `fixed-window:2:${W} 12 x`)
  const refused = await stack.consume('su', 1)
  const now = await serverNow(redis)
  const start = Math.floor(now / W) * W
  t.match(refused, { allowed: false, policies: [{ allowed: false, remaining: 0 }, { allowed: true, remaining: 4 }] })
  t.equal(await redis.get(keys[0]!), `fixed-window:2:${W} ${start} 2`, 'the worst state: the window full')
  const ttl = await redis.pttl(keys[0]!)
  t.ok(ttl > 0 && ttl <= start + W - now + 50, `with its TTL, the window's end: ${ttl}`)
  t.same(await snapshot([keys[1]!]), bucketBefore, 'the bucket consumed nothing')
  await redis.set(keys[0]!, `fixed-window:2:${W} 99999999999999999 0`)
  t.match(await stack.check('su', 1), { allowed: false })
  t.equal(await redis.get(keys[0]!), `fixed-window:2:${W} ${start} 2`, 'a check replaces it too (that takes nothing)')
})

t.test('a key of the wrong type in a stack is corrupt state: decided as the worst legitimate state, rewritten with its TTL', { skip }, async (t) => {
  const prefix = withPrefix(t, 'stack-type')
  const stack = redisBackend({ client: redis, prefix, timeoutMs: SLOW }).stack('app#t', [twice, bucket])
  // At /0, a hash without a TTL, /1 missing.
  const [a0, a1] = stack.keysOf('sa') as [string, string]
  await redis.hset(a0, 'x', '1')
  const refused = await stack.consume('sa', 1)
  const now = await serverNow(redis)
  const start = Math.floor(now / W) * W
  t.match(refused, { allowed: false, policies: [{ allowed: false, remaining: 0 }, { allowed: true, remaining: 5 }] }, 'refused as a full window; nothing taken from the bucket')
  t.equal(await redis.get(a0), `fixed-window:2:${W} ${start} 2`, 'rewritten as the worst state: the window full')
  const ttl = await redis.pttl(a0)
  t.ok(ttl > 0 && ttl <= start + W - now + 50, `with its TTL, the window's end: ${ttl}`)
  t.equal(await redis.exists(a1), 0, 'the bucket stays missing')
  t.same(await stack.state('sa'), [{ start, count: 2 }, undefined])

  // At /1, a list without a TTL, /0 a state of its own; a check replaces it too (that takes nothing).
  const [b0, b1] = stack.keysOf('sb') as [string, string]
  await stack.consume('sb', 1)
  const window = await snapshot([b0])
  await redis.del(b1)
  await redis.rpush(b1, 'x')
  t.match(await stack.check('sb', 1), { allowed: false, policies: [{ allowed: true, remaining: 1 }, { allowed: false, remaining: 0 }] }, 'refused as an empty bucket')
  t.match(await redis.get(b1), /^token-bucket:10:60000:5 0 \d+$/, 'rewritten as the worst state: the bucket empty')
  const bucketTtl = await redis.pttl(b1)
  t.ok(bucketTtl > 0 && bucketTtl <= recoveryMs(bucket), `with its TTL, the bucket's recovery: ${bucketTtl}`)
  t.same(await snapshot([b0]), window, 'the window: untouched')
})

t.test('keys swapped between the policies: a conflict, and every key of the stack is left with a TTL', { skip }, async (t) => {
  const prefix = withPrefix(t, 'stack-swap')
  const stack = redisBackend({ client: redis, prefix, timeoutMs: SLOW }).stack('app#w', [twice, bucket])
  const [k0, k1] = stack.keysOf('su') as [string, string]
  await stack.consume('su', 1)
  const [v0, v1] = await redis.mget(k0, k1) as [string, string]
  // Each holds the other's policy, without a TTL.
  await redis.set(k0, v1)
  await redis.set(k1, v0)
  for (const decide of [() => stack.consume('su', 1), () => stack.check('su', 1)]) {
    await redis.persist(k0)
    await redis.persist(k1)
    t.match(await decide().catch((e: unknown) => e), { code: 'RATES_POLICY_CONFLICT', existing: bucket, requested: twice })
    t.same(await redis.mget(k0, k1), [v1, v0], 'neither value rewritten')
    const [ttl0, ttl1] = [await redis.pttl(k0), await redis.pttl(k1)]
    t.ok(ttl0 > 0 && ttl0 <= recoveryMs(twice), `/0: the caller's recovery for it, ${ttl0}`)
    t.ok(ttl1 > 0 && ttl1 <= recoveryMs(bucket), `/1 too, though /0 conflicted first: ${ttl1}`)
  }
  // A conflict at /0 and a value of the wrong type at /1: the conflict is answered, /1 is
  // rewritten as the worst state, as a refusal would leave it.
  await redis.del(k1)
  await redis.sadd(k1, 'x')
  t.match(await stack.consume('su', 1).catch((e: unknown) => e), { code: 'RATES_POLICY_CONFLICT' })
  t.match(await redis.get(k1), /^token-bucket:10:60000:5 0 \d+$/)
  t.ok(await redis.pttl(k1) > 0)
})

// ---- the script's own arguments and deadline ------------------------------------------------------

t.test('the script: the deadline, the test time, bad arguments', { skip }, async (t) => {
  const prefix = withPrefix(t, 'stack-args')
  const k = [`${prefix}{a:s}/0`, `${prefix}{a:s}/1`]
  const fps = [policyFingerprint({ algorithm: 'fixed-window', limit: 2, windowMs: 60_000 }), policyFingerprint(bucket)]
  t.same(await redis.evalsha(DECIDE_STACK_SHA, 2, ...k, '1', '0', ...fps, '1500', '1500'), [3, 1500], 'at the deadline: too late')
  t.equal(await redis.exists(...k), 0, 'nothing written')
  t.same(await redis.evalsha(DECIDE_STACK_SHA, 2, ...k, '1', '0', ...fps, '1800000000500', '1800000000501'),
    [0, 1, 1800000000500, 1, 1, 0, 1800000060000, 1800000060000, 1, 4, 0, 1800000006500, 1800000006500], 'before it: decided, at the test time')
  t.same(await redis.mget(...k), ['fixed-window:2:60000 1800000000000 1', 'token-bucket:10:60000:5 240000 1800000000500'])
  t.same(await redis.pttl(k[0]!), -1, 'with the test time, no TTL')
  // On the server's clock (other keys: the test time is far from it).
  const k2 = [`${prefix}{a:t}/0`, `${prefix}{a:t}/1`]
  const now = await serverNow(redis)
  const [code, at] = await redis.evalsha(DECIDE_STACK_SHA, 2, ...k2, '1', '1', ...fps, '', String(now)) as [number, number]
  t.same([code, at >= now], [3, true], 'on the server clock')
  t.match(await redis.evalsha(DECIDE_STACK_SHA, 2, ...k2, '1', '1', ...fps, '', String(now + 60_000)), [0, 1])
  t.equal(await redis.exists(...k2), 0, 'a check stores nothing')
  const bad: string[][] = [
    ['one', '0', ...fps],
    ['1', '3', ...fps],
    ['c1', '2', ...fps],
    ['1', '', ...fps],
    ['1', '0', fps[0]!],
    ['1', '0', ...fps, '', 'soon'],
    ['1', '0', ...fps, '', '5', 'more'],
    ['1', '0', 'TOKEN:1:1', fps[1]!]
  ]
  for (const args of bad) await t.rejects(redis.evalsha(DECIDE_STACK_SHA, 2, ...k, ...args), /bad arguments/, JSON.stringify(args))
  await t.rejects(redis.evalsha(DECIDE_STACK_SHA, 0, '1', '0'), /bad arguments/, 'no key')
  await t.rejects(redis.evalsha(DECIDE_STACK_SHA, 2, ...k, '1', '0', fps[0]!, 'leaky:1:1'), /unknown algorithm leaky/)
  t.same(await redis.mget(...k), ['fixed-window:2:60000 1800000000000 1', 'token-bucket:10:60000:5 240000 1800000000500'], 'unchanged')
})

// ---- CLIENT PAUSE on a private server -------------------------------------------------------------

t.test('CLIENT PAUSE: stack decisions that timed out during the pause consumed nothing', { skip: noServer }, async (t) => {
  const server = await startPrivateServer()
  t.teardown(server.stop)
  const client: Redis = testClient(server.url)
  await client.connect()
  t.teardown(() => client.disconnect())
  const slow: Policy = { algorithm: 'token-bucket', limit: 1000, windowMs: 3_600_000, burst: 1000 }
  const stack = redisBackend({ client, timeoutMs: 50 }).stack('app#p', [slow, { algorithm: 'fixed-window', limit: 100, windowMs: 3_600_000 }])
  t.match(await resume(() => stack.consume('su', 1)), { allowed: true }, 'a reply: the server time is observed')
  const before = await Promise.all(stack.keysOf('su').map((key) => client.get(key)))
  await server.admin.client('PAUSE', 1000, 'ALL')
  const calls = Array.from({ length: 6 }, async (_, i) => {
    await sleep(i * 5)
    const identity = i % 2 === 0 ? 'su' : 'sv'
    return (i % 3 === 0 ? stack.check(identity, 1) : stack.consume(identity, 2)).then(() => undefined, (e: unknown) => e)
  })
  for (const [i, error] of (await Promise.all(calls)).entries()) {
    t.match(error, { code: 'RATES_UNAVAILABLE', message: /did not answer within 50 ms/ }, `call ${i} timed out`)
  }
  t.equal(await client.ping(), 'PONG', 'the pause is over and the late calls have run')
  t.same(await Promise.all(stack.keysOf('su').map((key) => client.get(key))), before, 'su: unchanged')
  t.equal(await client.exists(...stack.keysOf('sv')), 0, 'sv: nothing stored')
  const tokens = (await stack.state('su'))[0] as { tokens: number }
  t.ok(tokens.tokens >= 998 * 3_600_000, 'the warm-up\'s unit (two if a busy machine timed its first try out) consumed in all')
})
