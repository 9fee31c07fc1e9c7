// Stored states the backend did not write (or that no longer fit): the decision script against
// its TypeScript twin (stored-state.ts) for any string a key may hold — random policies, random
// stored values (huge, negative, fractional, NaN-ish, future, wrong field counts, stray
// whitespace) — every reply field and the value stored afterwards; then, on the server clock, the
// TTL every path that reads a key leaves behind; keys of the wrong type (a hash, a list …), read as
// a state not trusted, by the script and through the gate. Against the shared Redis, under unique
// prefixes; the one test that needs an ACL on a redis-server of its own.
import assert from 'node:assert/strict'
import t, { type Test } from 'tap'
import fc from 'fast-check'
import Fastify from 'fastify'
import admission from '../../../lib/index.js'
import { kernelFor, kernelOf, longestBlockMs, type Algorithm, type Policy } from '../../../lib/core/rates/index.js'
import { capacityOf, normalizePolicy, policyFingerprint } from '../../../lib/rates/policy.js'
import { DECIDE_LUA, DECIDE_SHA } from '../../../lib/backends/redis/decide-script.js'
import { redisBackend } from '../../../lib/backends/redis/redis-backend.js'
import { readStored, recoveryMs, validFields, worstState } from '../../../lib/backends/redis/stored-state.js'
import { deleteKeys, keptByScript, keysUnder, redisServerMissing, serverNow, sharedRedis, startPrivateServer, uniquePrefix } from './helpers.js'

const ALGORITHMS: readonly Algorithm[] = ['token-bucket', 'fixed-window', 'sliding-window-counter', 'gcra']
const SLOW = 10_000
const hasBurst = (algorithm: Algorithm): boolean => algorithm === 'token-bucket' || algorithm === 'gcra'

// Awaited before any test starts: a top-level await after a test would race the end of the file.
const shared = await sharedRedis()
const noServer = await redisServerMissing()
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
  // A third with a penalty (two fields more: the block's end and its strikes).
  const penalty = fc.oneof(fc.constant(undefined), fc.constant(undefined), fc.constantFrom<unknown>('restart', 'double'))
  // A large limit with a small window can leave gcra's scaled time beyond the safe range: invalid.
  return fc.record({ limit, windowMs, burst, penalty })
    .map(({ limit, windowMs, burst, penalty }) => {
      const base = hasBurst(algorithm) && burst !== undefined ? { algorithm, limit, windowMs, burst } : { algorithm, limit, windowMs }
      return valid(penalty === undefined ? base : { ...base, penalty })
    })
    .filter((policy): policy is Readonly<Policy> => policy !== undefined)
}

/** Numbers near every bound the script checks, for `policy` at `now`. */
function boundaries (policy: Policy, now: number): number[] {
  const R = recoveryMs(policy)
  const W = policy.windowMs
  const near = (n: number): number[] => [n - 1, n, n + 1]
  // A charge's debt: a count up to twice the limit, a level down to one capacity below empty.
  const out = [0, 1, ...near(policy.limit), ...near(2 * policy.limit), ...near(capacityOf(policy) * W), ...near(-capacityOf(policy) * W), -1,
    ...near(now), ...near(now + R), now - W, Math.floor((now + R) / W) * W, Math.floor((now + R) / W) * W + W, Math.floor(now / W) * W]
  if (policy.algorithm === 'gcra') {
    const kernel = kernelOf('gcra')
    const tatOf = (at: number): number => (kernel.fresh(policy, at) as { tat: number }).tat
    const tau = (worstState(policy, 0) as { tat: number }).tat
    out.push(...near(tatOf(now + R) + tau), ...near(tatOf(now + R) + 2 * tau), tatOf(now), tatOf(now) + tau)
  }
  if (policy.penalty !== undefined) out.push(...near(now + R + Math.max(R, longestBlockMs(policy.penalty, W))), 63, 64, 65, now + W)
  return out
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

/** A decision of `cost`, or (with `units`) a charge of that many units, taken or returned. */
interface Case { readonly policy: Readonly<Policy>, readonly now: number, readonly cost: number, readonly units?: number, readonly stored: string | null }

/**
 * A stored value: absent, the caller's fingerprint (mostly) with fields of any count joined by a
 * separator (mostly one space), another policy's fingerprint, or any string at all.
 */
function caseArb (algorithm: Algorithm): fc.Arbitrary<Case> {
  return policyArb(algorithm).chain((policy) => fc.record({
    now: fc.oneof(fc.integer({ min: 0, max: 1_000_000 }), fc.integer({ min: 1_800_000_000_000, max: 1_801_000_000_000 })),
    cost: fc.integer({ min: 1, max: capacityOf(policy) }),
    units: fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.integer({ min: -capacityOf(policy), max: capacityOf(policy) }) })
  }).chain(({ now, cost, units }) => {
    const fields = kernelFor(policy).fields
    const fingerprint = policyFingerprint(policy)
    const separator = fc.oneof({ weight: 12, arbitrary: fc.constant(' ') }, { weight: 1, arbitrary: fc.constantFrom('  ', '\t', '\n', '') })
    const ours = fc.record({
      fields: fc.oneof({ weight: 6, arbitrary: fc.constant(fields) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 6 }) })
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
      ...(units === undefined ? {} : { units: fc.constant(units) }),
      stored: fc.oneof({ weight: 1, arbitrary: fc.constant(null) }, { weight: 12, arbitrary: ours }, { weight: 2, arbitrary: other }, { weight: 1, arbitrary: anything })
    })
  }))
}

/** The script's reply and the value left in the key, as the TypeScript twin predicts them. */
function model ({ policy, now, cost, units, stored }: Case): { reply: unknown[], after: string | null, valid: boolean } {
  const kernel = kernelFor(policy)
  const fingerprint = policyFingerprint(policy)
  const read = stored === null ? { kind: 'state' as const, state: kernel.fresh(policy, now), valid: true } : readStored(stored, policy, fingerprint, now)
  if (read.kind === 'conflict') return { reply: [1, read.fingerprint], after: stored, valid: true }
  const out = units === undefined ? kernel.consume(read.state, policy, now, cost) : kernel.charge(read.state, policy, now, units)
  const row = new Float64Array(kernel.fields)
  kernel.write(out.state, row, 0)
  const reply = out.allowed
    ? [0, 1, out.remaining, 0, out.resetAt, now, out.moreAt]
    : [0, 0, out.remaining, out.retryAfterMs, out.resetAt, now, out.moreAt, ...row]
  // A refusal keeps a trusted stored state as it is (unless a penalty's block changed).
  const kept = stored !== null && read.valid && keptByScript(policy, kernel, read.state, out, units !== undefined)
  return { reply: reply.map((n) => n + 0), after: kept ? stored : [fingerprint, ...row].join(' '), valid: read.valid }
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
      const amount = c.units === undefined ? String(c.cost) : `c${c.units}`
      const reply = await redis.evalsha(DECIDE_SHA, 1, key, policyFingerprint(c.policy), amount, String(c.now))
      assert.deepEqual(reply, expected.reply, 'the reply')
      assert.equal(await redis.get(key), expected.after, 'the value left in the key')
      if (!expected.valid) invalid++
      if (!expected.valid && c.units === undefined) {
        // Never an allow, and never a lock beyond the policy's worst recovery time (with a penalty,
        // the first block's window when longer).
        const [, allowed, , retryAfterMs, resetAt] = reply as number[]
        const lock = c.policy.penalty === undefined ? recoveryMs(c.policy) : Math.max(recoveryMs(c.policy), c.policy.windowMs)
        assert.equal(allowed, 0)
        assert.ok((retryAfterMs as number) <= lock && (resetAt as number) <= c.now + lock, 'denied within R')
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

t.test('a key of the wrong type is corrupt state: decided as the worst legitimate state, rewritten with its TTL', { skip }, async (t) => {
  const prefix = withPrefix(t, 'type')
  const W = 60_000
  const fixed: Policy = { algorithm: 'fixed-window', limit: 2, windowMs: W }
  const limiter = redisBackend({ client: redis, prefix, denyCache: false, timeoutMs: SLOW }).limiter('app#t', fixed)
  const fp = policyFingerprint(fixed)
  const writes: Array<[string, (key: string) => Promise<unknown>]> = [
    ['a hash', (key) => redis.hset(key, 'p', fp)],
    ['a list', (key) => redis.rpush(key, fp)],
    ['a set', (key) => redis.sadd(key, fp)],
    ['a sorted set', (key) => redis.zadd(key, 1, fp)],
    ['a stream', (key) => redis.xadd(key, '*', 'p', fp)]
  ]
  for (const [i, [what, write]] of writes.entries()) {
    const key = limiter.keyOf(`s${i}`)
    await write(key)
    t.equal(await redis.pttl(key), -1, `${what}, without a TTL`)
    t.match(await limiter.consume(`s${i}`, 1), { allowed: false, remaining: 0 }, `${what}: refused as a full window`)
    t.match(await redis.get(key), new RegExp(`^${fp} \\d+ 2$`), `${what}: rewritten as the worst state`)
    const ttl = await redis.pttl(key)
    t.ok(ttl > 0 && ttl <= W, `${what}: PTTL ${ttl} <= ${W}`)
  }
  // With the test time argument: rewritten, without a TTL (test times do not follow the server's).
  const key = limiter.keyOf('stest')
  await redis.hset(key, 'p', fp)
  t.same(await redis.evalsha(DECIDE_SHA, 1, key, fp, '1', '1800000000500'), [0, 0, 0, 59_500, 1_800_000_060_000, 1_800_000_000_500, 1_800_000_060_000, 1_800_000_000_000, 2])
  t.equal(await redis.get(key), `${fp} 1800000000000 2`)
  t.equal(await redis.pttl(key), -1)
})

t.test('any other error of GET (an ACL that forbids it) stays an error: nothing is rewritten', { skip: noServer }, async (t) => {
  const server = await startPrivateServer()
  t.teardown(server.stop)
  const admin = server.admin
  const fixed: Policy = { algorithm: 'fixed-window', limit: 2, windowMs: 60_000 }
  const backend = redisBackend({ client: admin, denyCache: false, timeoutMs: SLOW })
  const limiter = backend.limiter('app#acl', fixed)
  const stack = backend.stack('app#acls', [fixed, fixed])
  const keys = [limiter.keyOf('su'), ...stack.keysOf('su')]
  for (const key of keys) await admin.set(key, `${policyFingerprint(fixed)} 0 2`)
  await admin.call('ACL', 'SETUSER', 'noget', 'on', 'nopass', '+@all', '-get', '~*')
  await admin.call('AUTH', 'noget', 'any')
  await t.rejects(limiter.consume('su', 1), { code: 'RATES_UNAVAILABLE', message: /Redis failed: .*can't run this command/ })
  await t.rejects(stack.consume('su', 1), { code: 'RATES_UNAVAILABLE', message: /Redis failed: .*can't run this command/ })
  await admin.call('AUTH', 'default', 'any')
  t.same(await admin.mget(...keys), keys.map(() => `${policyFingerprint(fixed)} 0 2`), 'every key as it was')
})

t.test('through the gate: keys of the wrong type are answered 429 with the wait of the worst state, never 503', { skip }, async (t) => {
  const prefix = withPrefix(t, 'gate-type')
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend: redisBackend({ client: redis, prefix, denyCache: false, timeoutMs: SLOW }), rateLimit: false })
  const hour = { algorithm: 'fixed-window', limit: 2, windowMs: 3_600_000 } as const
  app.get('/one', { config: { admission: { rateLimit: hour } } }, async () => 'ok')
  app.get('/stack', { config: { admission: { rateLimit: [hour, { algorithm: 'token-bucket', limit: 10, windowMs: 60_000 }] } } }, async () => 'ok')
  for (const [url, count] of [['/one', 1], ['/stack', 2]] as const) {
    const before = await keysUnder(redis, prefix)
    t.equal((await app.inject(url)).statusCode, 200)
    const keys = (await keysUnder(redis, prefix)).filter((key) => !before.includes(key))
    t.equal(keys.length, count, `${url}: its keys`)
    for (const key of keys) {
      await redis.del(key)
      await redis.hset(key, 'x', '1')
    }
    for (let i = 0; i < 2; i++) {
      const refused = await app.inject(url)
      t.equal(refused.statusCode, 429, `${url}: refused as the worst state allows, not unavailable`)
      const wait = Number(refused.headers['retry-after'])
      t.ok(wait >= 1 && wait <= 3600, `${url}: Retry-After ${wait}, within the hour's window`)
    }
    for (const key of keys) {
      t.equal(await redis.type(key), 'string', `${key}: rewritten`)
      t.ok(await redis.pttl(key) > 0, `${key}: with a TTL`)
    }
  }
})
