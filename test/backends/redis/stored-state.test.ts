// The TypeScript twin of the script's stored-state rule, and the backend's state() on it, with no
// Redis: what corrupt-state.test.ts holds the Lua to runs everywhere here (coverage holds on a
// machine without Redis).
import t from 'tap'
import { checkedState, readStored, recoveryMs, validFields, worstState } from '../../../lib/backends/redis/stored-state.js'
import { redisBackend } from '../../../lib/backends/redis/redis-backend.js'
import { longestBlockMs, type Policy } from '../../../lib/core/rates/index.js'
import { RatesPolicyConflictError, RatesStoppedError, RatesUnavailableError } from '../../../lib/rates/errors.js'
import { normalizePolicy, policyFingerprint } from '../../../lib/rates/policy.js'

const NOW = 1_700_000_000_000
const TB: Policy = { algorithm: 'token-bucket', limit: 10, windowMs: 1000, burst: 5 }
const FW: Policy = { algorithm: 'fixed-window', limit: 3, windowMs: 1000 }
const SW: Policy = { algorithm: 'sliding-window-counter', limit: 4, windowMs: 1000 }
const GC: Policy = { algorithm: 'gcra', limit: 2, windowMs: 1000, burst: 4 }

t.test('recoveryMs: the worst state\'s full recovery, per algorithm', async (t) => {
  t.equal(recoveryMs(TB), 500, '5 tokens at 10 per second')
  t.equal(recoveryMs(FW), 1000)
  t.equal(recoveryMs(SW), 2000)
  t.equal(recoveryMs(GC), 2000, '4 at 2 per second')
})

t.test('worstState: denies every cost and recovers within R; checkedState keeps a valid state and replaces a bad one', async (t) => {
  t.same(worstState(TB, NOW), { tokens: 0, last: NOW })
  t.same(worstState(FW, NOW + 1), { start: NOW, count: 3 })
  t.same(worstState(SW, NOW + 1), { start: NOW, previous: 0, current: 4 })
  t.same(worstState(GC, NOW), { tat: NOW + 4 * 500 }, 'scale 1 (gcd(2, 1000) = 2), interval 500 ms')
  t.same(checkedState(TB, { tokens: 4000, last: NOW }, NOW), { tokens: 4000, last: NOW }, 'in range: itself')
  t.same(checkedState(TB, { tokens: 4000, last: NOW + 501 }, NOW), worstState(TB, NOW), 'last more than R ahead')
  t.same(checkedState(TB, { tokens: 5001, last: NOW }, NOW), worstState(TB, NOW), 'above capacity')
  t.same(checkedState(FW, { start: NOW + 1, count: 1 }, NOW), worstState(FW, NOW), 'an unaligned window')
  // A charge's debt of one capacity is a legitimate state (limiter.charge): up to twice the limit.
  t.same(checkedState(FW, { start: NOW, count: 6 }, NOW), { start: NOW, count: 6 }, 'a count with a debt of one window')
  t.same(checkedState(FW, { start: NOW, count: 7 }, NOW), worstState(FW, NOW), 'a count above twice the limit')
  t.same(checkedState(SW, { start: NOW, previous: 0, current: 8 }, NOW), { start: NOW, previous: 0, current: 8 }, 'current with a debt')
  t.same(checkedState(SW, { start: NOW, previous: 0, current: 9 }, NOW), worstState(SW, NOW))
  t.same(checkedState(TB, { tokens: -5000, last: NOW }, NOW), { tokens: -5000, last: NOW }, 'a level one capacity below empty')
  t.same(checkedState(TB, { tokens: -5001, last: NOW }, NOW), worstState(TB, NOW), 'below that')
  t.same(checkedState(SW, { start: NOW, previous: 5, current: 0 }, NOW), worstState(SW, NOW))
  t.same(checkedState(SW, { start: NOW, previous: 4, current: 4 }, NOW), { start: NOW, previous: 4, current: 4 })
  // tau = 2000: a tat up to 2 tau ahead of the horizon (a debt of one burst).
  t.same(checkedState(GC, { tat: (NOW + 2000) + 4000 + 1 }, NOW), worstState(GC, NOW), 'tat past the horizon')
  t.same(checkedState(GC, { tat: (NOW + 2000) + 4000 }, NOW), { tat: (NOW + 2000) + 4000 }, 'at it')
  // A policy without room for a debt (chargeProblem) trusts none: no charge ever reaches it.
  const tight: Policy = { algorithm: 'fixed-window', limit: 2 ** 52, windowMs: 1000 }
  t.equal(validFields(tight, [NOW, 2 ** 52], NOW), true)
  t.equal(validFields(tight, [NOW, 2 ** 52 + 1], NOW), false, 'no debt without room for it')
  t.equal(validFields({ algorithm: 'token-bucket', limit: 1, windowMs: 2 ** 52 }, [-1, NOW], NOW), false)
  // tau = 3.002e15: 2 tau on the 2100 horizon is safe, 3 tau is not: the horizon plus one tau.
  const long: Policy = { algorithm: 'gcra', limit: 1, windowMs: 3_002_000_000_000_000 }
  t.equal(validFields(long, [NOW + 2 * long.windowMs], NOW), true)
  t.equal(validFields(long, [NOW + 2 * long.windowMs + 1], NOW), false)
  t.equal(validFields(FW, [-1000, 0], NOW), false, 'only a token bucket has a signed field')
  t.equal(validFields(TB, [5000, NOW + 500], NOW), true, 'the bounds are inclusive')
})

t.test('readStored: conflict, trusted, or decided as the worst state', async (t) => {
  const fp = policyFingerprint(TB)
  t.same(readStored(`${fp} 3000 ${NOW}`, TB, fp, NOW), { kind: 'state', state: { tokens: 3000, last: NOW }, valid: true })
  t.same(readStored(`fixed-window:3:1000 0 1`, TB, fp, NOW), { kind: 'conflict', fingerprint: 'fixed-window:3:1000' })
  t.same(readStored('', TB, fp, NOW), { kind: 'conflict', fingerprint: '' })
  for (const junk of [`${fp} 0 99999999999999`, `${fp} 1.5 ${NOW}`, `${fp}  3000 ${NOW}`, `${fp} 3000`, `${fp} 007 ${NOW}`, `${fp} 3000 ${NOW} 1`, `${fp} -0 ${NOW}`, `${fp} -5001 ${NOW}`, `${fp} - ${NOW}`]) {
    t.same(readStored(junk, TB, fp, NOW), { kind: 'state', state: worstState(TB, NOW), valid: false }, JSON.stringify(junk))
  }
  t.same(readStored(`${fp} -1 ${NOW}`, TB, fp, NOW), { kind: 'state', state: { tokens: -1, last: NOW }, valid: true }, 'a debt')
  const fw = policyFingerprint(FW)
  t.same(readStored(`${fw} -1000 0`, FW, fw, NOW), { kind: 'state', state: worstState(FW, NOW), valid: false }, 'no sign elsewhere')
  t.same(readStored(`${fp} 0 99999999999999`, TB, fp, Infinity).kind, 'state', 'no time bound with Infinity')
  t.equal((readStored(`${fp} 0 99999999999999`, TB, fp, Infinity) as { valid: boolean }).valid, true)
})

t.test('state() with a scripted client: undefined, the state, a conflict, junk, stopped', async (t) => {
  const replies: unknown[] = []
  const client = { evalsha: async () => null, eval: async () => replies.shift() }
  const backend = redisBackend({ client, timeoutMs: 1000 })
  const limiter = backend.limiter('app#s', TB)
  const fp = policyFingerprint(TB)
  replies.push(null, `${fp} 2000 ${NOW}`, 'gcra:2:1000:4 5', `${fp} x y`, 42)
  t.equal(await limiter.state('sa'), undefined)
  t.same(await limiter.state('sa'), { tokens: 2000, last: NOW })
  t.type(await limiter.state('sa').catch((e: unknown) => e), RatesPolicyConflictError)
  t.type(await limiter.state('sa').catch((e: unknown) => e), RatesUnavailableError)
  t.type(await limiter.state('sa').catch((e: unknown) => e), RatesUnavailableError, 'not a string')
  await backend.stop()
  t.type(await limiter.state('sa').catch((e: unknown) => e), RatesStoppedError)
})

t.test('delete() with a scripted client: true, false, a conflict, stopped; the deny cache forgets the identity', async (t) => {
  const replies: unknown[] = []
  const client = { evalsha: async () => null, eval: async () => replies.shift() }
  const backend = redisBackend({ client, timeoutMs: 1000, denyCache: false })
  const limiter = backend.limiter('app#d', TB)
  replies.push(1, 0, ['gcra:2:1000:4'], ['not a fingerprint'])
  t.equal(await limiter.delete('sa'), true)
  t.equal(await limiter.delete('sa'), false)
  t.type(await limiter.delete('sa').catch((e: unknown) => e), RatesPolicyConflictError)
  t.type(await limiter.delete('sa').catch((e: unknown) => e), RatesUnavailableError, 'a value this backend did not write')
  await backend.stop()
  t.type(await limiter.delete('sa').catch((e: unknown) => e), RatesStoppedError)
})

t.test('charge() with a scripted client: the amount goes as "c<units>", a stack\'s as mode 2; stopped', async (t) => {
  const sent: string[][] = []
  const replies: unknown[] = []
  const client = {
    evalsha: async (_sha: string, _keys: number, ...args: string[]) => { sent.push(args); return replies.shift() },
    eval: async () => null
  }
  const backend = redisBackend({ client, timeoutMs: 1000 })
  const limiter = backend.limiter('app#c', TB)
  replies.push([0, 0, 0, 600, NOW + 1000, NOW, NOW + 600, -1000, NOW])
  t.match(await limiter.charge!('sa', 6), { allowed: false, remaining: 0, retryAfterMs: 600 })
  t.same(sent[0]!.slice(1, 3), [policyFingerprint(TB), 'c6'], 'the key, then the fingerprint and the amount')
  const stack = backend.stack('app#s', [TB, FW])
  replies.push([0, 1, NOW, 1, 4, 0, NOW + 200, NOW + 100, 1, 2, 0, NOW + 1000, NOW + 1000])
  t.match(await stack.charge!('sa', -1), { allowed: true, policies: [{ remaining: 4 }, { remaining: 2 }] })
  t.same(sent[1]!.slice(2, 4), ['-1', '2'], 'the units, then mode 2')
  await backend.stop()
  t.type(await limiter.charge!('sa', 1).catch((e: unknown) => e), RatesStoppedError)
})

t.test('a penalty\'s two fields: in range up to R + max(R, the longest block) ahead and 64 strikes; the worst state is not blocked', async (t) => {
  const restart = normalizePolicy({ ...FW, penalty: 'restart' })
  const double = normalizePolicy({ ...TB, penalty: { mode: 'double', maxMs: 8000 } })
  // fixed-window R = 1000, restart's longest block one window: blockedUntil <= now + 2000.
  t.equal(validFields(restart, [NOW, 1, NOW + 2000, 64], NOW), true, 'at both bounds')
  t.equal(validFields(restart, [NOW, 1, NOW + 2001, 3], NOW), false, 'a block ending too far ahead')
  t.equal(validFields(restart, [NOW, 1, NOW, 65], NOW), false, 'too many strikes')
  t.equal(validFields(restart, [NOW, 7, NOW, 1], NOW), false, "the quota's own fields still checked")
  // token-bucket R = 500, double's longest 8000: <= now + 8500.
  t.equal(validFields(double, [5000, NOW, NOW + 8500, 4], NOW), true)
  t.equal(validFields(double, [5000, NOW, NOW + 8501, 4], NOW), false)
  t.same(worstState(restart, NOW), { inner: worstState(FW, NOW), blockedUntil: 0, strikes: 0 })
  const fp = policyFingerprint(restart)
  t.same(readStored(`${fp} ${NOW} 1 ${NOW + 100} 2`, restart, fp, NOW), { kind: 'state', state: { inner: { start: NOW, count: 1 }, blockedUntil: NOW + 100, strikes: 2 }, valid: true }, 'four fields, the block after the window')
  t.match(readStored(`${fp} ${NOW} 1`, restart, fp, NOW), { kind: 'state', valid: false }, 'the quota\'s fields alone are not a penalized state')
  t.same(checkedState(double, { inner: { tokens: 0, last: NOW }, blockedUntil: NOW + 9000, strikes: 4 }, NOW), worstState(double, NOW))
  t.equal(longestBlockMs(restart.penalty!, 1000), 1000)
  t.equal(longestBlockMs(double.penalty!, 1000), 8000)
})
