// The Redis backend's stacks, TypeScript side, with scripted fake clients (no server: every line
// is reached on a machine without Redis): keys and arguments, replies as decisions, conflicts,
// "too late", replies not understood, NOSCRIPT, the timeout, stop, the registry calls, and how
// the stack script is cut from the single-key one. The script itself runs in stack-script.test.ts.
import t from 'tap'
import type { Policy } from '../../../lib/core/rates/index.js'
import { RatesInvalidArgumentError, RatesPolicyConflictError, RatesStoppedError, RatesUnavailableError } from '../../../lib/rates/errors.js'
import { policyFingerprint } from '../../../lib/rates/policy.js'
import { DECIDE_LUA } from '../../../lib/backends/redis/decide-script.js'
import { DECIDE_STACK_LUA, DECIDE_STACK_SHA, section, swapOnce } from '../../../lib/backends/redis/decide-stack-script.js'
import { redisBackend, testingRedisBackend, type NodeRedisScriptClient, type RedisScriptClient } from '../../../lib/backends/redis/redis-backend.js'
import { scriptCall } from '../../../lib/backends/redis/redis-client.js'

const fixed: Policy = Object.freeze({ algorithm: 'fixed-window', limit: 3, windowMs: 1000 })
const bucket: Policy = Object.freeze({ algorithm: 'token-bucket', limit: 10, windowMs: 60_000, burst: 5 })
const FPS = [policyFingerprint(fixed), policyFingerprint(bucket)]

/** A fake ioredis-shaped client: `reply` answers each call; every call is recorded. */
function fake (reply: (method: 'evalsha' | 'eval', rest: string[]) => unknown): RedisScriptClient & { calls: Array<[string, string, number, string[]]> } {
  const calls: Array<[string, string, number, string[]]> = []
  return {
    calls,
    async evalsha (sha, numKeys, ...rest) {
      calls.push(['evalsha', sha, numKeys, rest])
      return reply('evalsha', rest)
    },
    async eval (script, numKeys, ...rest) {
      calls.push(['eval', script, numKeys, rest])
      return reply('eval', rest)
    }
  }
}

const never = (): Promise<unknown> => new Promise(() => { /* never settles */ })
const rejection = (p: Promise<unknown>): Promise<unknown> => p.then(() => { throw new Error('expected a rejection') }, (e: unknown) => e)

// A decision reply: [0, allowed, now, (allowed, remaining, retryAfterMs, resetAt, moreAt) per policy].
const ADMITTED = [0, 1, 5000, 1, 2, 0, 6000, 6000, 1, 4, 0, 17_000, 11_000]
// The bucket had room and nothing was stored: full capacity now, so more comes now too.
const REFUSED = [0, 0, 5000, 0, 0, 700, 6000, 5700, 1, 5, 0, 5000, 5000]

t.test('keys: one per policy, the suffix after the hash tag; one EVALSHA with every key and fingerprint', async (t) => {
  const client = fake(async () => ADMITTED)
  const backend = redisBackend({ client, prefix: 'p:', denyCache: false })
  const stack = backend.stack('app#s', [fixed, bucket])
  t.same(stack.policies, [fixed, bucket])
  t.equal(stack.address, 'app#s')
  t.same(stack.keysOf('sa'), ['p:{app#s:sa}/0', 'p:{app#s:sa}/1'])
  t.same(stack.keysOf('s}{x'), ['p:{app#s:s}{x}/0', 'p:{app#s:s}{x}/1'], 'a brace in the identity: the same text up to the tag\'s end in every key')
  await stack.consume('sa', 2)
  await stack.check('sa', 1)
  t.same(client.calls[0], ['evalsha', DECIDE_STACK_SHA, 2, ['p:{app#s:sa}/0', 'p:{app#s:sa}/1', '2', '0', ...FPS]], 'consume: no deadline before a server time is observed')
  const [method, sha, numKeys, rest] = client.calls[1]!
  t.same([method, sha, numKeys, rest.slice(0, 6)], ['evalsha', DECIDE_STACK_SHA, 2, ['p:{app#s:sa}/0', 'p:{app#s:sa}/1', '1', '1', ...FPS]], 'check: the dry flag')
  t.equal(rest[6], '', 'no test time in production')
  const deadline = Number(rest[7])
  t.ok(deadline >= 5000 + 50 && deadline < 5000 + 50 + 1000, `then the deadline, from the server now the reply carried: ${deadline}`)
  t.equal(rest.length, 8)
  t.equal(DECIDE_STACK_LUA.length > 0 && DECIDE_STACK_SHA.length, 40)
})

t.test('the test clock: the time, then the deadline after an observed reply, as the single decision sends them', async (t) => {
  const clock = { now: 1000 }
  let replies: unknown[] = []
  const client = fake(async () => {
    clock.now += 30
    return replies.shift()
  })
  const stack = testingRedisBackend({ client, timeoutMs: 50 }, { now: () => clock.now }).stack('app#d', [fixed])
  t.equal(stack.now(), undefined, 'the server\'s clock: not known before a reply')
  replies = [[0, 1, 5010, 1, 2, 0, 6000, 6000]]
  await stack.consume('sx', 1)
  t.type(stack.now(), 'number', 'known from the reply (the time a charge\'s give-back is judged by)')
  t.same(client.calls[0]?.[3].slice(1), ['1', '0', FPS[0], '1000'])
  clock.now = 1100
  replies = [[3, 5300]]
  const late = await rejection(stack.check('sx', 1))
  t.same(client.calls[1]?.[3].slice(1), ['1', '1', FPS[0], '1100', String(5010 + 70 + 50)])
  t.ok(late instanceof RatesUnavailableError)
  t.match(late, { message: /too late: Redis ran the stack's decision for "admission:\{app#d:sx\}\/0" after its deadline \(the 50 ms timeout\); it consumed nothing/ })
  // "Too late" carries the server's now too: observed 5300 at 1130.
  clock.now = 1200
  replies = [[0, 1, 5400, 1, 2, 0, 6000, 6000]]
  await stack.consume('sx', 1)
  t.same(client.calls[2]?.[3].slice(1), ['1', '0', FPS[0], '1200', String(5300 + 70 + 50)])
  // A charge that gives units back has its return deadline as the script's deadline when earlier
  // than the timeout's; one that takes units has the timeout's only.
  replies = [[0, 1, 5400, 1, 2, 0, 6000, 6000], [0, 1, 5400, 1, 2, 0, 6000, 6000]]
  await stack.charge('sx', -1, 5350)
  const back = client.calls[3]![3].slice(1)
  t.same([back[0], back[1], back.at(-1)], ['-1', '2', '5350'], 'units back: refused by the script from 5350 on')
  await stack.charge('sx', 1)
  const taken = client.calls[4]![3].slice(1)
  t.same([taken[0], taken[1]], ['1', '2'])
  t.ok(Number(taken.at(-1)) > 5350, `units taken: the timeout's deadline only (${String(taken.at(-1))})`)
})

t.test('replies as decisions: all or nothing, the least remaining, the latest resetAt, the largest wait', async (t) => {
  let reply: unknown = ADMITTED
  const stack = redisBackend({ client: fake(async () => reply) }).stack('app#s', [fixed, bucket])
  t.same(await stack.consume('sa', 1), {
    allowed: true,
    denied: false,
    remaining: 2,
    resetAt: 17_000,
    policies: [
      { allowed: true, remaining: 2, retryAfterMs: 0, resetAt: 6000, moreAt: 6000 },
      { allowed: true, remaining: 4, retryAfterMs: 0, resetAt: 17_000, moreAt: 11_000 }
    ]
  })
  reply = REFUSED
  t.same(await stack.consume('sa', 1), {
    allowed: false,
    denied: true,
    remaining: 0,
    retryAfterMs: 700,
    resetAt: 6000,
    policies: [
      { allowed: false, remaining: 0, retryAfterMs: 700, resetAt: 6000, moreAt: 5700 },
      { allowed: true, remaining: 5, retryAfterMs: 0, resetAt: 5000, moreAt: 5000 }
    ]
  })
  // Both refuse: the larger wait (after it, both have room: neither consumed).
  reply = [0, 0, 5000, 0, 0, 700, 6000, 5700, 0, 0, 12_000, 65_000, 11_000]
  t.match(await stack.check('sa', 3), { allowed: false, retryAfterMs: 12_000, remaining: 0, resetAt: 65_000, policies: [{ moreAt: 5700 }, { moreAt: 11_000 }] })
  reply = [0, 0, 5000, 0, 0, 900, 6000, 5900, 0, 0, 100, 65_000, 5100]
  t.match(await stack.check('sa', 3), { allowed: false, retryAfterMs: 900 })
})

t.test('a key of the stack holding another policy: RatesPolicyConflictError naming that policy', async (t) => {
  let reply: unknown = [1, 'gcra:5:60000:2', 2]
  const stack = redisBackend({ client: fake(async () => reply) }).stack('app#s', [fixed, bucket])
  const error = await rejection(stack.consume('sa', 1))
  t.ok(error instanceof RatesPolicyConflictError)
  t.match(error, { code: 'RATES_POLICY_CONFLICT', limiterName: 'app#s', existing: { algorithm: 'gcra', limit: 5, windowMs: 60_000, burst: 2 } })
  t.equal((error as RatesPolicyConflictError).requested, bucket, 'the policy of the key that conflicts')
  reply = [1, 'hello', 1]
  t.match(await rejection(stack.check('sa', 1)), { code: 'RATES_UNAVAILABLE', message: /the key "admission:\{app#s:sa\}\/0" holds a value this backend did not write/ })
  reply = [1, '', 2]
  t.match(await rejection(stack.check('sa', 1)), { code: 'RATES_UNAVAILABLE', message: /"admission:\{app#s:sa\}\/1" holds a value/ })
})

t.test('replies the stack does not understand are RATES_UNAVAILABLE', async (t) => {
  const cases: unknown[] = [
    'OK', null, [], 5,
    [0, 1, 5000, 1, 2, 0, 6000, 6000], // one policy's worth for two
    [...ADMITTED, 0],
    [0, 1, 5000, 1, 2, 0, 6000, 1, 4, 0, 17_000], // 4 numbers a policy: the shape before moreAt
    [0, 2, 5000, 1, 2, 0, 6000, 6000, 1, 4, 0, 17_000, 11_000],
    [0, 1, 5000, 1, 2, 0, 6000, 6000, 0, 4, 9, 17_000, 11_000], // allowed, yet a policy refused
    [0, 0, 5000, 1, 2, 0, 6000, 6000, 1, 4, 0, 17_000, 11_000], // refused, yet every policy had room
    [0, 1, 5000, 1, 2, 0, 6000, 6000, 2, 4, 0, 17_000, 11_000],
    [0, 1, 5000, 1, 2.5, 0, 6000, 6000, 1, 4, 0, 17_000, 11_000],
    [0, 1, '5000', 1, 2, 0, 6000, 6000, 1, 4, 0, 17_000, 11_000],
    [0, 1, 5000, 1, 2, 0, 6000, 6000, 1, 4, 0, 17_000, 1.5],
    [1, 0, 5000, 1, 2, 0, 6000, 6000, 1, 4, 0, 17_000, 11_000],
    [1, 'gcra:5:60000:2'], [1, 'gcra:5:60000:2', 0], [1, 'gcra:5:60000:2', 3], [1, 'gcra:5:60000:2', 1.5], [1, 5, 1], [1, 'gcra:5:60000:2', 1, 1],
    [3], [3, '5'], [3, 1.5], [3, 1, 2], [2, 1]
  ]
  for (const reply of cases) {
    const error = await rejection(redisBackend({ client: fake(async () => reply) }).stack('app#s', [fixed, bucket]).consume('sa', 1))
    t.ok(error instanceof RatesUnavailableError, JSON.stringify(reply))
    t.match((error as Error).message, /unexpected reply from the stack script for "admission:\{app#s:sa\}\/0"/, JSON.stringify(reply))
  }
})

t.test('NOSCRIPT, and only NOSCRIPT, falls back to EVAL of the stack script once; other failures have their cause', async (t) => {
  const noscript = new Error('NOSCRIPT No matching script. Please use EVAL.')
  const client = fake(async (method) => {
    if (method === 'evalsha') throw noscript
    return [0, 1, 5000, 1, 2, 0, 6000, 6000]
  })
  t.match(await redisBackend({ client }).stack('app#s', [fixed]).consume('sx', 1), { allowed: true, remaining: 2 })
  t.same(client.calls.map(([method, script, numKeys]) => [method, script, numKeys]), [['evalsha', DECIDE_STACK_SHA, 1], ['eval', DECIDE_STACK_LUA, 1]])
  t.same(client.calls[1]?.[3], ['admission:{app#s:sx}/0', '1', '0', FPS[0]])

  const failing = fake(async () => { throw new Error('CROSSSLOT Keys in request don\'t hash to the same slot') })
  t.match(await rejection(redisBackend({ client: failing }).stack('app#s', [fixed]).check('sx', 1)), { code: 'RATES_UNAVAILABLE', message: /Redis failed: CROSSSLOT/, cause: { message: /CROSSSLOT/ } })
  t.equal(failing.calls.length, 1, 'no EVAL for another error')
})

t.test('timeout: no answer within timeoutMs rejects with RATES_UNAVAILABLE', async (t) => {
  const stack = redisBackend({ client: fake(never), timeoutMs: 15 }).stack('app#s', [fixed, bucket])
  // The timer's own message says which path rejected: the timeout, not another failure.
  t.match(await rejection(stack.consume('sx', 1)), { code: 'RATES_UNAVAILABLE', message: /Redis did not answer within 15 ms/ })
  t.match(await rejection(stack.state('sx')), { code: 'RATES_UNAVAILABLE', message: /within 15 ms/ })
})

t.test('stacks: one per address and list of policies; another list conflicts; none is refused; stop', async (t) => {
  const client = fake(async () => ADMITTED)
  const backend = redisBackend({ client })
  const stack = backend.stack('app#s', [fixed, bucket])
  t.equal(backend.stack('app#s', [{ ...fixed }, { ...bucket }]), stack, 'the same policies: the same stack')
  const conflict = (() => { try { backend.stack('app#s', [bucket, fixed]) } catch (e) { return e } })()
  t.ok(conflict instanceof RatesPolicyConflictError, 'another order is another stack')
  t.match(conflict, { limiterName: 'app#s', existing: [fixed, bucket], requested: [bucket, fixed] })
  t.not(backend.stack('app#other', [fixed]), stack)
  t.throws(() => backend.stack('app#empty', []), RatesInvalidArgumentError)
  t.throws(() => backend.stack('app#empty', []), { code: 'RATES_INVALID_ARGUMENT', path: 'policies', message: /Expected `policies` to be one or more policies/ })

  await backend.stop()
  t.throws(() => backend.stack('app#s', [fixed, bucket]), { code: 'RATES_STOPPED', limiterName: 'app#s' })
  for (const call of [() => stack.consume('sx', 1), () => stack.check('sx', 1), () => stack.state('sx'), () => stack.delete('sx')]) {
    const error = await rejection(call())
    t.ok(error instanceof RatesStoppedError)
    t.match(error, { code: 'RATES_STOPPED', limiterName: 'app#s' })
  }
  t.equal(client.calls.length, 0, 'no call after stop')
})

t.test('state: each policy\'s stored state, read by one EVAL on every key', async (t) => {
  let reply: unknown = [null, 'token-bucket:10:60000:5 120000 7000']
  const client = fake(async () => reply)
  const stack = redisBackend({ client }).stack('app#s', [fixed, bucket])
  t.same(await stack.state('sa'), [undefined, { tokens: 120_000, last: 7000 }])
  t.same(client.calls.map(([method, , numKeys, rest]) => [method, numKeys, rest]), [['eval', 2, ['admission:{app#s:sa}/0', 'admission:{app#s:sa}/1']]])
  reply = ['fixed-window:3:1000 5000 2', null]
  t.same(await stack.state('sa'), [{ start: 5000, count: 2 }, undefined])
  reply = [null, 'gcra:5:60000:2 100']
  t.match(await rejection(stack.state('sa')), { code: 'RATES_POLICY_CONFLICT', existing: { algorithm: 'gcra' }, requested: bucket })
  const foreign: unknown[] = [['hello', null], [null, 'token-bucket:10:60000:5 x 1'], [null, 5]]
  for (const value of foreign) {
    reply = value
    t.match(await rejection(stack.state('sa')), { code: 'RATES_UNAVAILABLE', message: /the key "admission:\{app#s:sa\}\/[01]" holds a value this backend did not write/ }, JSON.stringify(value))
  }
  for (const value of [null, 'x', [null], [null, null, null]]) {
    reply = value
    t.match(await rejection(stack.state('sa')), { code: 'RATES_UNAVAILABLE', message: /unexpected reply from the read script/ }, JSON.stringify(value))
  }
})

t.test('delete: every key of the stack, by one EVAL; true when any was there', async (t) => {
  let reply: unknown = 0
  const client = fake(async () => reply)
  const stack = redisBackend({ client }).stack('app#s', [fixed, bucket])
  t.equal(await stack.delete('sa'), false)
  t.same(client.calls[0]?.slice(2), [2, ['admission:{app#s:sa}/0', 'admission:{app#s:sa}/1', ...FPS]])
  reply = 1
  t.equal(await stack.delete('sa'), true)
  reply = 2
  t.equal(await stack.delete('sa'), true)
  reply = [2, 'fixed-window:4:1000']
  t.match(await rejection(stack.delete('sa')), { code: 'RATES_POLICY_CONFLICT', existing: { limit: 4 }, requested: bucket })
  reply = [1, '']
  t.match(await rejection(stack.delete('sa')), { code: 'RATES_UNAVAILABLE', message: /"admission:\{app#s:sa\}\/0" holds a value this backend did not write/ })
  for (const value of [3, -1, 1.5, 'OK', null, [0, 'x'], [3, 'x'], [1, 5], [1]]) {
    reply = value
    t.match(await rejection(stack.delete('sa')), { code: 'RATES_UNAVAILABLE', message: /unexpected reply from the delete script/ }, JSON.stringify(value))
  }
})

t.test('scriptCall: several keys, each shape its way (one key stays a string)', async (t) => {
  const seen: unknown[][] = []
  const io: RedisScriptClient = {
    evalsha: async (...args) => { seen.push(['evalsha', ...args]); return 'a' },
    eval: async (...args) => { seen.push(['eval', ...args]); return 'b' }
  }
  const node: NodeRedisScriptClient = {
    evalSha: async (...args) => { seen.push(['evalSha', ...args]); return 'c' },
    eval: async (...args) => { seen.push(['eval', ...args]); return 'd' }
  }
  t.equal(await scriptCall(io, 'ioredis')('sha', 'S', ['k1', 'k2'], ['x']), 'a')
  t.equal(await scriptCall(io, 'ioredis')('source', 'L', ['k1', 'k2', 'k3'], []), 'b')
  t.equal(await scriptCall(node, 'node-redis')('sha', 'S', ['k1', 'k2'], ['x']), 'c')
  t.equal(await scriptCall(node, 'node-redis')('source', 'L', ['k1'], []), 'd')
  t.same(seen, [
    ['evalsha', 'S', 2, 'k1', 'k2', 'x'],
    ['eval', 'L', 3, 'k1', 'k2', 'k3'],
    ['evalSha', 'S', { keys: ['k1', 'k2'], arguments: ['x'] }],
    ['eval', 'L', { keys: ['k1'], arguments: [] }]
  ])
})

t.test('the stack script is cut from the single-key script\'s own text', async (t) => {
  // The single script's parts are in the stack script as they are (the conflict names its key).
  const cut = (from: string, to: string): string => section(DECIDE_LUA, from, to)
  t.ok(DECIDE_STACK_LUA.includes(cut('-- arithmetic.ts', '-- Each algorithm: fields')), 'the helpers')
  t.ok(DECIDE_STACK_LUA.includes(cut('-- Expires when fully recovered', 'if allowed then\n')), 'the write')
  t.ok(DECIDE_STACK_LUA.includes(cut('-- The numbers of a trusted stored state', '-- Expires when fully recovered')), 'the algorithms')
  t.ok(DECIDE_STACK_LUA.includes('    conflict = conflict or { 1, storedFingerprint, i }\n    break\n'), 'a conflict is kept, and the next key read')
  t.notOk(DECIDE_STACK_LUA.includes('    return { 1, storedFingerprint }\n'))
  t.notOk(DECIDE_STACK_LUA.includes('KEYS[1]'), 'no single key')
  t.equal(section('a\nb\nc\nd\n', 'b', 'd'), 'b\nc\n')
  t.throws(() => section(DECIDE_LUA, 'no such line', 'if allowed then\n'), /the decision script has no lines from "no such line" to "if allowed then\\n"/)
  t.throws(() => section(DECIDE_LUA, '-- arithmetic.ts', 'no such line'), /no lines from/)
  t.equal(swapOnce('a b c', 'b', 'x'), 'a x c')
  t.throws(() => swapOnce('a b c', 'd', 'x'), /"d" is not in the decision script exactly once/)
  t.throws(() => swapOnce('a b b', 'b', 'x'), /exactly once/)
})

t.test('an address names one quota: a limiter and a stack there conflict, either way round', async (t) => {
  const backend = redisBackend({ client: fake(() => ADMITTED) })
  backend.limiter('one', fixed)
  t.throws(() => backend.stack('one', [fixed, bucket]), RatesPolicyConflictError)
  backend.stack('two', [fixed, bucket])
  t.throws(() => backend.limiter('two', fixed), RatesPolicyConflictError)
})
