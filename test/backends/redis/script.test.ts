// The decision script against the shared Redis: its pinned SHA, the differential test against the
// TypeScript kernels (every algorithm, every decision field, the stored state), policy conflicts,
// the TTL, and the key layout.
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import t, { type Test } from 'tap'
import fc from 'fast-check'
import { kernelFor, type Algorithm, type Policy } from '../../../lib/core/rates/index.js'
import type { RateDecision } from '../../../lib/rates/decision.js'
import { RatesPolicyConflictError, RatesUnavailableError } from '../../../lib/rates/errors.js'
import { capacityOf, normalizePolicy, policyFingerprint } from '../../../lib/rates/policy.js'
import { DECIDE_LUA, DECIDE_SHA } from '../../../lib/backends/redis/decide-script.js'
import { RedisBackend, redisBackend, testingRedisBackend } from '../../../lib/backends/redis/redis-backend.js'
import { checkedState } from '../../../lib/backends/redis/stored-state.js'
import { counting, deleteKeys, keptByScript, keysUnder, serverNow, sharedRedis, uniquePrefix } from './helpers.js'

/**
 * The script's SHA-1. Changing the Lua changes it: update it here, deliberately. Last changed
 * when charges came into the script ("c<units>": a debt of up to one capacity that the windows
 * carry forward, a token bucket's level below empty, a penalty's block kept by a charge).
 */
const PINNED_SHA = '943332183c60d49771a2405d0f1d8eaac9b01a40'

const ALGORITHMS: readonly Algorithm[] = ['token-bucket', 'fixed-window', 'sliding-window-counter', 'gcra']
// Timeouts are tested with a private server (faults.test.ts); here a busy machine must not fail a test.
const SLOW = 10_000
const hasBurst = (algorithm: Algorithm): boolean => algorithm === 'token-bucket' || algorithm === 'gcra'

t.test('the script is pinned by its SHA-1', async (t) => {
  t.equal(DECIDE_SHA, createHash('sha1').update(DECIDE_LUA).digest('hex'))
  t.equal(DECIDE_SHA, PINNED_SHA, 'an edit to the Lua must update PINNED_SHA in this test')
})

const shared = await sharedRedis()
const skip = 'skip' in shared ? shared.skip : false
const redis = 'redis' in shared ? shared.redis : (undefined as never)
if (!skip) t.teardown(() => redis.quit())

/** Runs `fn` with a fresh prefix whose keys are deleted afterwards. */
function withPrefix (t: Test, label: string): string {
  const prefix = uniquePrefix(label)
  t.teardown(async () => { await deleteKeys(redis, prefix) })
  return prefix
}

t.test('the server computes the same SHA-1 for the script', { skip }, async (t) => {
  t.equal(await redis.script('LOAD', DECIDE_LUA), PINNED_SHA)
})

// ---- the differential test -------------------------------------------------------------------

const view = (d: RateDecision): { allowed: boolean, remaining: number, retryAfterMs: number, resetAt: number } =>
  ({ allowed: d.allowed, remaining: d.remaining, retryAfterMs: d.allowed ? 0 : d.retryAfterMs, resetAt: d.resetAt })

function policyArb (algorithm: Algorithm): fc.Arbitrary<Readonly<Policy>> {
  const limit = fc.oneof(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 30 }))
  const windowMs = fc.oneof(fc.integer({ min: 1, max: 10 }), fc.integer({ min: 1, max: 2_000 }), fc.constantFrom(1_000, 60_000, 3_600_000))
  const burst = fc.option(fc.integer({ min: 1, max: 40 }), { nil: undefined })
  // A third of the policies with a penalty: its block, its strikes, its bound (as many windows).
  const penalty = fc.oneof(fc.constant(undefined), fc.constant(undefined), fc.constantFrom<unknown>('restart', 'double', 3))
  return fc.record({ limit, windowMs, burst, penalty }).map(({ limit, windowMs, burst, penalty }) => {
    const base = hasBurst(algorithm) && burst !== undefined ? { algorithm, limit, windowMs, burst } : { algorithm, limit, windowMs }
    return normalizePolicy(penalty === undefined ? base : { ...base, penalty: penalty === 3 ? { mode: 'double', maxMs: 3 * windowMs } : penalty })
  })
}

/** A request of `cost`, or (with `units`) a charge of that many units, taken or returned. */
interface Op { readonly dt: number, readonly who: number, readonly cost: number, readonly units?: number }
interface Scenario { readonly policy: Readonly<Policy>, readonly t0: number, readonly ops: readonly Op[] }

/**
 * Time mostly forward (0 included: several decisions in one ms), within a window or across several;
 * with `backward`, sometimes a clock that steps back. Identities from a pool of three; costs from 1
 * to the capacity; one op in four a charge (up to a capacity taken or returned: a debt the
 * windows carry forward). Start times near 0 and realistic epoch ms (~1.8e12).
 */
function scenarioArb (algorithm: Algorithm, backward: boolean): fc.Arbitrary<Scenario> {
  return policyArb(algorithm).chain((policy) => {
    const W = policy.windowMs
    const cap = capacityOf(policy)
    const steps = [
      { weight: 3, arbitrary: fc.constant(0) },
      { weight: 6, arbitrary: fc.integer({ min: 0, max: Math.max(1, Math.ceil(W / 2)) }) },
      { weight: 3, arbitrary: fc.integer({ min: 0, max: 3 * W }) },
      { weight: 1, arbitrary: fc.integer({ min: 0, max: 10 * W + 50 }) }
    ]
    if (backward) steps.push({ weight: 1, arbitrary: fc.integer({ min: -2 * W, max: -1 }) })
    return fc.record({
      policy: fc.constant(policy),
      t0: fc.oneof(fc.integer({ min: 0, max: 1_000_000 }), fc.integer({ min: 1_800_000_000_000, max: 1_801_000_000_000 })),
      ops: fc.array(fc.record({
        dt: fc.oneof(...steps),
        who: fc.integer({ min: 0, max: 2 }),
        cost: fc.oneof(fc.integer({ min: 1, max: Math.min(2, cap) }), fc.integer({ min: 1, max: cap })),
        units: fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.integer({ min: -cap, max: cap }) }),
        // The same request again at once: what an identity that is denied does.
        again: fc.boolean()
      }), { minLength: 1, maxLength: 12 })
    }).map(({ policy, t0, ops }) => ({
      policy,
      t0,
      ops: ops.flatMap(({ again, units, ...op }) => {
        const first = units === undefined ? op : { ...op, units }
        return again ? [first, { ...op, dt: 0 }] : [first]
      })
    }))
  })
}

let runs = 0

/**
 * Drives a scenario through the kernel (the reference: one state per identity, stored after every
 * decision, as the memory backend does) and through `backend` (its test clock set to each op's
 * time, which the script then takes as its time). Every decision field must be equal; with
 * `checkStored`, the stored value too, field by field.
 */
async function differential (backend: RedisBackend, clock: { now: number }, prefix: string, s: Scenario, checkStored: boolean): Promise<void> {
  const kernel = kernelFor(s.policy)
  const address = `diff/${s.policy.algorithm}/${runs++}`
  const limiter = backend.limiter(address, s.policy)
  const states = new Map<string, unknown>()
  let now = s.t0
  for (const [i, { dt, who, cost, units }] of s.ops.entries()) {
    now = Math.max(0, now + dt)
    clock.now = now
    const identity = `sid${who}`
    // The script trusts a stored state only while its time fields are at most the policy's
    // recovery time ahead (a clock that stepped back further): stored-state.ts, its twin.
    const prior = states.get(identity)
    const state = prior === undefined ? kernel.fresh(s.policy, now) : checkedState(s.policy, prior, now)
    const out = units === undefined ? kernel.consume(state, s.policy, now, cost) : kernel.charge(state, s.policy, now, units)
    // A refusal on a trusted stored state keeps it as stored (decide-script.ts, `kept`).
    const kept = prior !== undefined && state === prior && keptByScript(s.policy, kernel, prior, out, units !== undefined)
    if (!kept) states.set(identity, out.state)
    const expected = { allowed: out.allowed, remaining: out.remaining + 0, retryAfterMs: out.retryAfterMs + 0, resetAt: out.resetAt + 0 }
    const got = view(await (units === undefined ? limiter.consume(identity, cost) : (limiter.charge as NonNullable<typeof limiter.charge>)(identity, units)))
    assert.deepEqual(got, expected, `op ${i} at ${now}: ${identity} ${units === undefined ? `cost ${cost}` : `charge ${units}`}`)
    if (checkStored) {
      const row = new Float64Array(kernel.fields)
      kernel.write(kept ? prior : out.state, row, 0)
      const stored = await redis.get(`${prefix}{${address}:${identity}}`)
      assert.equal(stored, [policyFingerprint(s.policy), ...row].join(' '), `stored state after op ${i}`)
    }
  }
}

for (const algorithm of ALGORITHMS) {
  t.test(`differential, ${algorithm}: Lua and the TypeScript kernel decide alike`, { skip }, async (t) => {
    const prefix = withPrefix(t, 'diff')
    const clock = { now: 0 }

    // Every field of every decision, and the stored state after each, clocks stepping back included.
    const plain = testingRedisBackend({ client: redis, prefix, denyCache: false, timeoutMs: SLOW }, { now: () => clock.now })
    let decisions = 0
    await fc.assert(fc.asyncProperty(scenarioArb(algorithm, true), async (s) => {
      decisions += s.ops.length
      await differential(plain, clock, prefix, s, true)
    }), { numRuns: 40 })

    // With the deny cache (forward time, as a monotonic clock gives it): still every field alike,
    // with fewer round trips.
    const client = counting(redis)
    const cached = testingRedisBackend({ client, prefix, timeoutMs: SLOW }, { now: () => clock.now })
    let cachedDecisions = 0
    await fc.assert(fc.asyncProperty(scenarioArb(algorithm, false), async (s) => {
      cachedDecisions += s.ops.length
      await differential(cached, clock, prefix, s, false)
    }), { numRuns: 40 })
    t.pass(`${decisions} decisions alike (stored state too); with the deny cache ${cachedDecisions} alike in ${client.calls.evalsha} round trips`)
    t.ok(client.calls.evalsha < cachedDecisions, 'the deny cache saved round trips')
    t.equal(client.calls.eval, 0, 'no NOSCRIPT on the shared server once loaded')
  })
}

// ---- conflicts -------------------------------------------------------------------------------

t.test('a key written under one policy, consumed under another: conflict, state untouched', { skip }, async (t) => {
  const prefix = withPrefix(t, 'conflict')
  const first: Policy = { algorithm: 'token-bucket', limit: 10, windowMs: 60_000, burst: 5 }
  const second: Policy = { algorithm: 'fixed-window', limit: 10, windowMs: 60_000 }
  const a = redisBackend({ client: redis, prefix, timeoutMs: SLOW })
  const b = redisBackend({ client: redis, prefix, timeoutMs: SLOW })
  t.ok((await a.limiter('app#send', first).consume('su1', 2)).allowed)
  const key = `${prefix}{app#send:su1}`
  const before = await redis.get(key)
  const expiresAt = await redis.pexpiretime(key)
  t.ok(expiresAt > 0, 'the key has an expiry')
  t.match(before, /^token-bucket:10:60000:5 \d+ \d+$/)

  const error = await b.limiter('app#send', second).consume('su1', 1).catch((e: unknown) => e)
  t.ok(error instanceof RatesPolicyConflictError)
  t.match(error, { code: 'RATES_POLICY_CONFLICT', limiterName: 'app#send', existing: first, requested: second })
  // Same algorithm, another number: a conflict too (one without burst, the other way round).
  const c = redisBackend({ client: redis, prefix, timeoutMs: SLOW })
  await c.limiter('app#other', second).consume('su1', 1)
  const reverse = await b.limiter('app#other', { algorithm: 'fixed-window', limit: 11, windowMs: 60_000 }).consume('su1', 1).catch((e: unknown) => e)
  t.match(reverse, { code: 'RATES_POLICY_CONFLICT', existing: second, requested: { limit: 11 } })

  t.equal(await redis.get(key), before, 'the stored state is unchanged')
  t.equal(await redis.pexpiretime(key), expiresAt, 'the expiry is unchanged (the absolute time, to the ms)')
  // Other identities of the same address are free (each key holds its own fingerprint).
  t.ok((await b.limiter('app#send', second).consume('su2', 1)).allowed)
})

// (A key of another type, a hash or a list, is a state not trusted: corrupt-state.test.ts.)
t.test('a key holding a string this backend did not write: RATES_UNAVAILABLE, never a reset', { skip }, async (t) => {
  const prefix = withPrefix(t, 'foreign')
  const policy: Policy = { algorithm: 'gcra', limit: 10, windowMs: 1000, burst: 10 }
  const limiter = redisBackend({ client: redis, prefix, denyCache: false, timeoutMs: SLOW }).limiter('app#x', policy)
  for (const [identity, value] of [['sstring', 'hello world'], ['sempty', '']] as const) {
    const key = `${prefix}{app#x:${identity}}`
    await redis.set(key, value)
    const error = await limiter.consume(identity, 1).catch((e: unknown) => e)
    t.ok(error instanceof RatesUnavailableError, identity)
    t.match((error as Error).message, /holds a value this backend did not write/, identity)
    t.equal(await redis.get(key), value, `${identity} left as it was`)
  }
})

t.test('the script refuses arguments that are not a policy', { skip }, async (t) => {
  const prefix = withPrefix(t, 'badargs')
  const key = `${prefix}{x}`
  await t.rejects(redis.evalsha(DECIDE_SHA, 1, key, 'token-bucket:1:1', 'one'), /bad arguments/)
  await t.rejects(redis.evalsha(DECIDE_SHA, 1, key, 'leaky:1:1', '1'), /unknown algorithm leaky/)
  await t.rejects(redis.evalsha(DECIDE_SHA, 1, key, 'TOKEN:1:1', '1'), /bad arguments/)
  t.equal(await redis.exists(key), 0)
})

// ---- TTL -------------------------------------------------------------------------------------

t.test('TTL: the key expires when its state has fully recovered, on the server clock', { skip }, async (t) => {
  const prefix = withPrefix(t, 'ttl')
  const backend = redisBackend({ client: redis, prefix, denyCache: false, timeoutMs: SLOW })
  const policies: Policy[] = [
    { algorithm: 'token-bucket', limit: 10, windowMs: 1000, burst: 5 },
    { algorithm: 'fixed-window', limit: 3, windowMs: 250 },
    { algorithm: 'sliding-window-counter', limit: 3, windowMs: 125 },
    { algorithm: 'gcra', limit: 4, windowMs: 1000, burst: 2 }
  ]
  let latest = 0
  for (const policy of policies) {
    const limiter = backend.limiter(`app#${policy.algorithm}`, policy)
    const before = await serverNow(redis)
    const d = await limiter.consume('sttl', 2)
    const key = `${prefix}{app#${policy.algorithm}:sttl}`
    const [[, ttl], [, time]] = await redis.multi().pttl(key).time().exec() as [[null, number], [null, [string, string]]]
    const at = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000)
    t.ok(d.allowed, policy.algorithm)
    // Checked at its own decision: the shortest policies' keys (125 ms) may be gone by the end of the loop on a busy machine.
    // A fixed window ends on the clock's multiples of windowMs, which may be a ms after the
    // decision: its key may be gone by the PTTL, but never before its resetAt (the server's TIME).
    t.ok(ttl > 0 || (ttl === -2 && at >= d.resetAt), `${policy.algorithm}: the key is there, with an expiry, until resetAt (PTTL ${ttl}, ${d.resetAt - at} ms before resetAt)`)
    t.ok(d.resetAt > before && d.resetAt <= at + 2 * policy.windowMs, `${policy.algorithm}: resetAt ${d.resetAt} on the server clock (${before})`)
    // The expiry is absolute: decision time + TTL = resetAt (the state's recoversAt), to the ms.
    // The script sets PX recoversAt - (its TIME), which Redis counts from its clock at the SET: the
    // expiry can only be late by the script's own run time (a few ms on a busy machine), never early.
    // (A key already gone, above, has no TTL to compare: how long ago it went is the machine's.)
    if (ttl > 0) t.ok(ttl - (d.resetAt - at) >= -1 && ttl - (d.resetAt - at) <= 50, `${policy.algorithm}: PTTL ${ttl} ≈ resetAt - now = ${d.resetAt - at}`)
    latest = Math.max(latest, d.resetAt)
  }
  while (await serverNow(redis) <= latest) await sleep(20)
  t.same(await keysUnder(redis, prefix), [], 'every key is gone once fully recovered')
  // And a gone key decides as a fresh one.
  const again = await backend.limiter('app#fixed-window', policies[1] as Policy).consume('sttl', 3)
  t.match(again, { allowed: true, remaining: 0 })
})

t.test('TTL: a denial that changes nothing writes nothing; the expiry stays at recoversAt', { skip }, async (t) => {
  const prefix = withPrefix(t, 'ttl-deny')
  const limiter = redisBackend({ client: redis, prefix, denyCache: false, timeoutMs: SLOW }).limiter('app#f', { algorithm: 'fixed-window', limit: 2, windowMs: 60_000 })
  const key = `${prefix}{app#f:su}`
  const first = await limiter.consume('su', 2)
  const expireAt = await redis.pexpiretime(key)
  t.ok(expireAt >= first.resetAt && expireAt <= first.resetAt + 50, `PEXPIRETIME ${expireAt} is the resetAt ${first.resetAt} (or just after)`)
  const denied = await limiter.consume('su', 1)
  t.match(denied, { allowed: false, remaining: 0, resetAt: first.resetAt })
  t.equal(await redis.pexpiretime(key), expireAt)
})

t.test('with the test time argument the state is stored without a TTL', { skip }, async (t) => {
  const prefix = withPrefix(t, 'testtime')
  const key = `${prefix}{app#t:s}`
  const reply = await redis.evalsha(DECIDE_SHA, 1, key, 'fixed-window:5:1000', '2', '1800000000500')
  t.same(reply, [0, 1, 3, 0, 1800000001000, 1800000000500, 1800000001000])
  t.equal(await redis.get(key), 'fixed-window:5:1000 1800000000000 2')
  t.equal(await redis.pttl(key), -1)
  const denied = await redis.evalsha(DECIDE_SHA, 1, key, 'fixed-window:5:1000', '4', '1800000000600')
  t.same(denied, [0, 0, 3, 400, 1800000001000, 1800000000600, 1800000001000, 1800000000000, 2], 'a denial returns the state after it')
})

// ---- key layout ------------------------------------------------------------------------------

t.test('keys: <prefix>{<address>:<identity>}, one key per identity and limiter', { skip }, async (t) => {
  const prefix = withPrefix(t, 'layout')
  const backend = redisBackend({ client: redis, prefix, timeoutMs: SLOW })
  const policy: Policy = { algorithm: 'fixed-window', limit: 5, windowMs: 60_000 }
  await backend.limiter('app/plugin~1#send%20mail', policy).consume('salice', 1)
  await backend.limiter('app/plugin~1#send%20mail', policy).consume('R8:tenantId3:st16:userId3:su1', 1)
  await backend.limiter('global#x', policy).consume('s}{', 1)
  t.same(await keysUnder(redis, prefix), [
    `${prefix}{app/plugin~1#send%20mail:R8:tenantId3:st16:userId3:su1}`,
    `${prefix}{app/plugin~1#send%20mail:salice}`,
    `${prefix}{global#x:s}{}`
  ].sort())
  t.equal(redisBackend({ client: redis }).prefix, 'admission:', 'the default prefix')
})
