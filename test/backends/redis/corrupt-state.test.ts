// Stored states the backend did not write (or that no longer fit): the decision script against
// its TypeScript twin (stored-state.ts) for any string a key may hold — random policies, random
// stored values (huge, negative, fractional, NaN-ish, future, wrong field counts, stray
// whitespace) — every reply field and the value stored afterwards; then, on the server clock, the
// TTL every path that reads a key leaves behind. Against the shared Redis, under unique prefixes.
import assert from 'node:assert/strict'
import t, { type Test } from 'tap'
import fc from 'fast-check'
import { kernelOf, type Algorithm, type Policy } from '../../../lib/core/rates/index.js'
import { capacityOf, normalizePolicy, policyFingerprint } from '../../../lib/rates/policy.js'
import { DECIDE_LUA, DECIDE_SHA } from '../../../lib/backends/redis/decide-script.js'
import { redisBackend } from '../../../lib/backends/redis/redis-backend.js'
import { readStored, recoveryMs, validFields, worstState } from '../../../lib/backends/redis/stored-state.js'
import { deleteKeys, serverNow, sharedRedis, uniquePrefix } from './helpers.js'

const ALGORITHMS: readonly Algorithm[] = ['token-bucket', 'fixed-window', 'sliding-window-counter', 'gcra']
const SLOW = 10_000
const hasBurst = (algorithm: Algorithm): boolean => algorithm === 'token-bucket' || algorithm === 'gcra'

// Awaited before any test starts: a top-level await after a test would race the end of the file.
const shared = await sharedRedis()
const skip = 'skip' in shared ? shared.skip : false
const redis = 'redis' in shared ? shared.redis : (undefined as never)
if (!skip) t.teardown(() => redis.quit())
// These tests call EVALSHA directly: the script must be on the server whatever ran before (a
// new script's SHA is on no server until something loads it).
if (!skip) await redis.script('LOAD', DECIDE_LUA)

// ---- the TypeScript side alone -----------------------------------------------------------------

t.test('stored-state: recovery times, worst states and their bounds', async (t) => {
  const tb: Policy = { algorithm: 'token-bucket', limit: 10, windowMs: 60_000, burst: 5 }
  const fw: Policy = { algorithm: 'fixed-window', limit: 3, windowMs: 1000 }
  const sw: Policy = { algorithm: 'sliding-window-counter', limit: 3, windowMs: 1000 }
  const gc: Policy = { algorithm: 'gcra', limit: 4, windowMs: 1000, burst: 2 }
  t.same([tb, fw, sw, gc].map(recoveryMs), [30_000, 1000, 2000, 500])
  t.same(worstState(tb, 1234), { tokens: 0, last: 1234 })
  t.same(worstState(fw, 1234), { start: 1000, count: 3 })
  t.same(worstState(sw, 1234), { start: 1000, previous: 0, current: 3 })
  // s = 1, T = 250, tau = 500.
  t.same(worstState(gc, 1234), { tat: 1734 })
  for (const policy of [tb, fw, sw, gc]) {
    const kernel = kernelOf(policy.algorithm)
    const worst = worstState(policy, 1234)
    t.equal(kernel.recoversAt(worst, policy) - 1234 <= recoveryMs(policy), true, `${policy.algorithm}: recovers within R`)
    t.equal(kernel.consume(worst, policy, 1234, 1).allowed, false, `${policy.algorithm}: denies`)
    const row = new Float64Array(kernel.fields)
    kernel.write(worst, row, 0)
    t.ok(validFields(policy, row, 1234), `${policy.algorithm}: the worst state is a valid one`)
  }
  // The example: a token bucket whose `last` lies 3,100 years ahead.
  const fp = policyFingerprint(tb)
  t.same(readStored(`${fp} 0 99999999999999`, tb, fp, 1_800_000_000_000), { kind: 'state', state: { tokens: 0, last: 1_800_000_000_000 }, valid: false })
  t.same(readStored(`${fp} 0 1800000030000`, tb, fp, 1_800_000_000_000), { kind: 'state', state: { tokens: 0, last: 1_800_000_030_000 }, valid: true }, 'R ahead: trusted')
  t.same(readStored(`${fp} 0 1800000030001`, tb, fp, 1_800_000_000_000), { kind: 'state', state: { tokens: 0, last: 1_800_000_000_000 }, valid: false }, 'R + 1 ahead: not')
  t.same(readStored(`${fp} 300000 5`, tb, fp, 10), { kind: 'state', state: { tokens: 300_000, last: 5 }, valid: true })
  t.match(readStored(`${fp} 300001 5`, tb, fp, 10), { kind: 'state', valid: false }, 'above capacity')
  t.match(readStored(`${fp}  1 5`, tb, fp, 10), { kind: 'state', valid: false }, 'two spaces')
  t.match(readStored(`${fp} 01 5`, tb, fp, 10), { kind: 'state', valid: false }, 'a leading zero')
  t.match(readStored(`${fp}\t1 5`, tb, fp, 10), { kind: 'state', valid: false }, 'a tab ends the fingerprint: it is ours, the fields are not')
  t.same(readStored('hello world', tb, fp, 10), { kind: 'conflict', fingerprint: 'hello' })
  t.same(readStored('', tb, fp, 10), { kind: 'conflict', fingerprint: '' })
  t.match(readStored(`${fp} 0 99999999999999`, tb, fp, Infinity), { kind: 'state', valid: true }, 'without a time (state()), only the form and the ranges')
})

// ---- the differential test ---------------------------------------------------------------------

function withPrefix (t: Test, label: string): string {
  const prefix = uniquePrefix(label)
  t.teardown(async () => { await deleteKeys(redis, prefix) })
  return prefix
}

function policyArb (algorithm: Algorithm): fc.Arbitrary<Readonly<Policy>> {
  const limit = fc.oneof(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 30 }), fc.constant(1_000_000))
  const windowMs = fc.oneof(fc.integer({ min: 1, max: 10 }), fc.integer({ min: 1, max: 2_000 }), fc.constantFrom(1_000, 60_000, 3_600_000))
  const burst = fc.option(fc.integer({ min: 1, max: 40 }), { nil: undefined })
  const valid = (input: unknown): Readonly<Policy> | undefined => { try { return normalizePolicy(input) } catch { return undefined } }
  // A large limit with a small window can leave gcra's scaled time beyond the safe range: invalid.
  return fc.record({ limit, windowMs, burst })
    .map(({ limit, windowMs, burst }) => valid(hasBurst(algorithm) && burst !== undefined ? { algorithm, limit, windowMs, burst } : { algorithm, limit, windowMs }))
    .filter((policy): policy is Readonly<Policy> => policy !== undefined)
}

/** Numbers near every bound the script checks, for `policy` at `now`. */
function boundaries (policy: Policy, now: number): number[] {
  const R = recoveryMs(policy)
  const W = policy.windowMs
  const near = (n: number): number[] => [n - 1, n, n + 1]
  const out = [0, 1, ...near(policy.limit), ...near(capacityOf(policy) * W), ...near(now), ...near(now + R), now - W,
    Math.floor((now + R) / W) * W, Math.floor((now + R) / W) * W + W, Math.floor(now / W) * W]
  if (policy.algorithm === 'gcra') {
    const kernel = kernelOf('gcra')
    const tatOf = (at: number): number => (kernel.fresh(policy, at) as { tat: number }).tat
    const tau = (worstState(policy, 0) as { tat: number }).tat
    out.push(...near(tatOf(now + R) + tau), tatOf(now), tatOf(now) + tau)
  }
  return out.filter((n) => n >= 0)
}

const JUNK = ['-1', '-0', '1.5', '1.0', '1e3', '0x10', 'nan', 'NaN', 'inf', '-inf', 'Infinity', '', '007', '00', '+1', 'x', '1_0',
  '9007199254740991', '9007199254740992', '9007199254740993', '9999999999999999', '99999999999999999', '99999999999999', '1' + '0'.repeat(30)]

/** A field: a number near a bound, any small number, or junk. */
function fieldArb (policy: Policy, now: number): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 5, arbitrary: fc.constantFrom(...boundaries(policy, now)).map(String) },
    { weight: 2, arbitrary: fc.nat({ max: 2 * capacityOf(policy) * policy.windowMs + 10 }).map(String) },
    { weight: 1, arbitrary: fc.maxSafeNat().map(String) },
    { weight: 2, arbitrary: fc.constantFrom(...JUNK) }
  )
}

interface Case { readonly policy: Readonly<Policy>, readonly now: number, readonly cost: number, readonly stored: string | null }

/**
 * A stored value: absent, the caller's fingerprint (mostly) with fields of any count joined by a
 * separator (mostly one space), another policy's fingerprint, or any string at all.
 */
function caseArb (algorithm: Algorithm): fc.Arbitrary<Case> {
  return policyArb(algorithm).chain((policy) => fc.record({
    now: fc.oneof(fc.integer({ min: 0, max: 1_000_000 }), fc.integer({ min: 1_800_000_000_000, max: 1_801_000_000_000 })),
    cost: fc.integer({ min: 1, max: capacityOf(policy) })
  }).chain(({ now, cost }) => {
    const fields = kernelOf(policy.algorithm).fields
    const fingerprint = policyFingerprint(policy)
    const separator = fc.oneof({ weight: 12, arbitrary: fc.constant(' ') }, { weight: 1, arbitrary: fc.constantFrom('  ', '\t', '\n', '') })
    const ours = fc.record({
      fields: fc.oneof({ weight: 6, arbitrary: fc.constant(fields) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 4 }) })
        .chain((n) => fc.array(fieldArb(policy, now), { minLength: n, maxLength: n })),
      separator,
      tail: fc.oneof({ weight: 12, arbitrary: fc.constant('') }, { weight: 1, arbitrary: fc.constantFrom(' ', '\n', ' 0', 'x') })
    }).map(({ fields, separator, tail }) => [fingerprint, ...fields].join(separator) + tail)
    const other = fc.constantFrom(`${fingerprint}0 1 2`, `x${fingerprint} 1 2`, 'gcra:1:1000 0', 'fixed-window:3:1000 0 1', 'hello world', ' leading', '')
    const anything = fc.string({ unit: 'binary-ascii', maxLength: 40 })
    return fc.record({
      policy: fc.constant(policy),
      now: fc.constant(now),
      cost: fc.constant(cost),
      stored: fc.oneof({ weight: 1, arbitrary: fc.constant(null) }, { weight: 12, arbitrary: ours }, { weight: 2, arbitrary: other }, { weight: 1, arbitrary: anything })
    })
  }))
}

/** The script's reply and the value left in the key, as the TypeScript twin predicts them. */
function model ({ policy, now, cost, stored }: Case): { reply: unknown[], after: string | null, valid: boolean } {
  const kernel = kernelOf(policy.algorithm)
  const fingerprint = policyFingerprint(policy)
  const read = stored === null ? { kind: 'state' as const, state: kernel.fresh(policy, now), valid: true } : readStored(stored, policy, fingerprint, now)
  if (read.kind === 'conflict') return { reply: [1, read.fingerprint], after: stored, valid: true }
  const out = kernel.consume(read.state, policy, now, cost)
  const row = new Float64Array(kernel.fields)
  kernel.write(out.state, row, 0)
  const reply = out.allowed
    ? [0, 1, out.remaining, 0, out.resetAt, now]
    : [0, 0, out.remaining, out.retryAfterMs, out.resetAt, now, ...row]
  return { reply: reply.map((n) => n + 0), after: [fingerprint, ...row].join(' '), valid: read.valid }
}

for (const algorithm of ALGORITHMS) {
  t.test(`corrupt states, ${algorithm}: the script reads any stored value as its TypeScript twin does`, { skip }, async (t) => {
    const prefix = withPrefix(t, 'corrupt')
    let cases = 0
    let invalid = 0
    let conflicts = 0
    await fc.assert(fc.asyncProperty(caseArb(algorithm), async (c) => {
      const key = `${prefix}{${cases++}}`
      if (c.stored !== null) await redis.set(key, c.stored)
      const expected = model(c)
      const reply = await redis.evalsha(DECIDE_SHA, 1, key, policyFingerprint(c.policy), String(c.cost), String(c.now))
      assert.deepEqual(reply, expected.reply, 'the reply')
      assert.equal(await redis.get(key), expected.after, 'the value left in the key')
      if (!expected.valid) {
        invalid++
        // Never an allow, and never a lock beyond the policy's worst recovery time.
        const [, allowed, , retryAfterMs, resetAt] = reply as number[]
        assert.equal(allowed, 0)
        assert.ok((retryAfterMs as number) <= recoveryMs(c.policy) && (resetAt as number) <= c.now + recoveryMs(c.policy), 'denied within R')
      }
      if (expected.reply[0] === 1) conflicts++
      await redis.unlink(key)
    }), { numRuns: 300 })
    t.ok(invalid > 50, `${invalid} of ${cases} stored values were invalid (${conflicts} conflicts)`)
  })
}

// ---- TTLs on the server clock ------------------------------------------------------------------

t.test('the issue: a token bucket with `last` 3,100 years ahead and no TTL', { skip }, async (t) => {
  const prefix = withPrefix(t, 'future')
  const policy: Policy = { algorithm: 'token-bucket', limit: 10, windowMs: 60_000, burst: 5 }
  const limiter = redisBackend({ client: redis, prefix, denyCache: false, timeoutMs: SLOW }).limiter('app#f', policy)
  const key = limiter.keyOf('su')
  await redis.set(key, `${policyFingerprint(policy)} 0 99999999999999`)
  t.equal(await redis.pttl(key), -1)
  const before = await serverNow(redis)
  const d = await limiter.consume('su', 1)
  t.match(d, { allowed: false, remaining: 0, retryAfterMs: 6000 }, 'denied as an empty bucket: one token in 6 s')
  const ttl = await redis.pttl(key)
  t.ok(ttl > 0 && ttl <= 30_000, `PTTL ${ttl}: at most the policy's recovery time (30 s)`)
  t.ok(d.resetAt >= before + 30_000 && d.resetAt <= before + 30_000 + 1000, `resetAt ${d.resetAt}: R after the decision`)
  t.match(await redis.get(key), new RegExp(`^${policyFingerprint(policy)} 0 \\d{13}$`), 'rewritten as the empty bucket at the server\'s now')
})

t.test('every path that reads a key leaves it with a TTL', { skip }, async (t) => {
  const prefix = withPrefix(t, 'ttl')
  const backend = redisBackend({ client: redis, prefix, denyCache: false, timeoutMs: SLOW })
  const W = 60_000
  const fixed: Policy = { algorithm: 'fixed-window', limit: 2, windowMs: W }
  const limiter = backend.limiter('app#w', fixed)
  const fp = policyFingerprint(fixed)
  const now = await serverNow(redis)

  // A valid state without a TTL, whose denial changes nothing: the next window, full (a clock that
  // stepped back by up to a window). Whatever the clock reads during the test, that window is not
  // behind it, so the denial leaves the value as it is.
  const next = Math.floor(now / W) * W + W
  const full = limiter.keyOf('sfull')
  await redis.set(full, `${fp} ${next} 2`)
  t.match(await limiter.consume('sfull', 1), { allowed: false, resetAt: next + W })
  t.equal(await redis.get(full), `${fp} ${next} 2`, 'unchanged')
  const ttl = await redis.pttl(full)
  t.ok(ttl > 0 && ttl <= next + W - now, `PTTL ${ttl}: set, to the state's recovery (at most ${next + W - now})`)
  // With a TTL already there, it stays.
  await redis.pexpire(full, 5 * W)
  await limiter.consume('sfull', 1)
  t.ok(await redis.pttl(full) > 4 * W, 'a TTL already set is left alone')

  // Fields that do not parse, without a TTL: decided (and stored) as a full window, with a TTL.
  const junk = limiter.keyOf('sjunk')
  await redis.set(junk, `${fp} abc`)
  t.match(await limiter.consume('sjunk', 1), { allowed: false, remaining: 0 })
  t.match(await redis.get(junk), new RegExp(`^${fp} \\d+ 2$`))
  const junkTtl = await redis.pttl(junk)
  t.ok(junkTtl > 0 && junkTtl <= W, `PTTL ${junkTtl} <= ${W}`)

  // Another policy's value without a TTL: a conflict, left as it is, with the caller's recovery
  // time as its TTL (no backend writes a key without one).
  const other = limiter.keyOf('sother')
  await redis.set(other, 'gcra:5:1000 1')
  await t.rejects(limiter.consume('sother', 1), { code: 'RATES_POLICY_CONFLICT' })
  t.equal(await redis.get(other), 'gcra:5:1000 1')
  const otherTtl = await redis.pttl(other)
  t.ok(otherTtl > 0 && otherTtl <= W, `PTTL ${otherTtl} <= ${W}`)
  const foreign = limiter.keyOf('sforeign')
  await redis.set(foreign, 'hello world')
  await t.rejects(limiter.consume('sforeign', 1), { code: 'RATES_UNAVAILABLE', message: /did not write/ })
  t.equal(await redis.get(foreign), 'hello world')
  t.ok(await redis.pttl(foreign) > 0)
  // A conflict whose key has a TTL: untouched.
  await redis.set(other, 'gcra:5:1000 1', 'PX', 5 * W)
  await t.rejects(limiter.consume('sother', 1), { code: 'RATES_POLICY_CONFLICT' })
  t.ok(await redis.pttl(other) > 4 * W)

  // With the test time argument, none of this sets a TTL (test times do not follow the server's).
  for (const [identity, value] of [['t1', `${fp} abc`], ['t2', 'gcra:5:1000 1'], ['t3', `${fp} ${next} 2`]] as const) {
    const key = limiter.keyOf(identity)
    await redis.set(key, value)
    await redis.evalsha(DECIDE_SHA, 1, key, fp, '1', String(now)).catch(() => undefined)
    t.equal(await redis.pttl(key), -1, `${identity}: no TTL with a test time`)
  }
})
