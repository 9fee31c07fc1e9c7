// The Redis backend's TypeScript side: options, limiters and stop, every way a call can fail
// (with scripted fake clients, deterministic), and the deny cache — with fakes for its arithmetic
// and against the shared Redis for "changes no decision, saves the round trips".
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import type { Cluster, Redis } from 'ioredis'
import type { Policy } from '../../../lib/core/rates/index.js'
import type { RateDecision } from '../../../lib/rates/decision.js'
import { RatesInvalidArgumentError, RatesPolicyConflictError, RatesStoppedError, RatesUnavailableError } from '../../../lib/rates/errors.js'
import { DECIDE_LUA, DECIDE_SHA } from '../../../lib/backends/redis/decide-script.js'
import {
  DEFAULT_DENY_CACHE_ENTRIES,
  DEFAULT_PREFIX,
  DEFAULT_TIMEOUT_MS,
  RedisBackend,
  testingRedisBackend,
  redisBackend,
  type RedisScriptClient
} from '../../../lib/backends/redis/redis-backend.js'
import { policyOfFingerprint } from '../../../lib/rates/policy.js'
import { counting, deleteKeys, sharedRedis, uniquePrefix } from './helpers.js'

// ioredis's Redis and Cluster (and so iovalkey's) fit the structural client type.
export type ClientsFit = [Redis extends RedisScriptClient ? true : never, Cluster extends RedisScriptClient ? true : never]
const fits: ClientsFit = [true, true]
void fits

const fixed: Policy = Object.freeze({ algorithm: 'fixed-window', limit: 3, windowMs: 1000 })
const bucket: Policy = Object.freeze({ algorithm: 'token-bucket', limit: 10, windowMs: 1000, burst: 10 })

/** A fake client: `reply` decides each call's outcome; calls are recorded. */
function fake (reply: (method: 'evalsha' | 'eval', args: string[]) => Promise<unknown>): RedisScriptClient & { calls: Array<[string, string[]]> } {
  const calls: Array<[string, string[]]> = []
  return {
    calls,
    evalsha (sha, numKeys, ...rest) {
      calls.push(['evalsha', [sha, String(numKeys), ...rest]])
      return reply('evalsha', rest)
    },
    eval (script, numKeys, ...rest) {
      calls.push(['eval', [script, String(numKeys), ...rest]])
      return reply('eval', rest)
    }
  }
}

const never = (): Promise<unknown> => new Promise(() => { /* never settles */ })
const rejection = (p: Promise<unknown>): Promise<unknown> => p.then(() => { throw new Error('expected a rejection') }, (e: unknown) => e)

t.test('options: defaults', async (t) => {
  const client = fake(never)
  const backend = redisBackend({ client })
  t.equal(backend.kind, 'redis')
  t.equal(backend.client, client)
  t.equal(backend.prefix, DEFAULT_PREFIX)
  t.equal(backend.timeoutMs, DEFAULT_TIMEOUT_MS)
  t.equal(backend.denyCacheEntries, DEFAULT_DENY_CACHE_ENTRIES)
  // The documented defaults, as a decision uses them: keys under 'admission:', a 50 ms timer,
  // a deny cache of 10 000 identities.
  const limiter = backend.limiter('app#d', fixed)
  t.equal(limiter.keyOf('s'), 'admission:{app#d:s}')
  const { result, delays } = armedBy(() => limiter.consume('s', 1))
  t.same(delays, [50], 'the decision\'s timer: 50 ms')
  t.match(await rejection(result), { code: 'RATES_UNAVAILABLE', message: /did not answer within 50 ms/ })
  t.equal(limiter.cache?.maxEntries, 10_000)
  t.same(client.calls.map(([method, args]) => [method, args[2]]), [['evalsha', 'admission:{app#d:s}']], 'the call went to that key')
  t.equal(redisBackend({ client, denyCache: {} }).denyCacheEntries, 10_000)
  t.equal(redisBackend({ client, denyCache: { maxEntries: undefined } }).denyCacheEntries, 10_000)
  t.equal(redisBackend({ client, denyCache: { maxEntries: 3 } }).denyCacheEntries, 3)
  t.equal(redisBackend({ client, denyCache: false }).denyCacheEntries, 0)
  t.equal(redisBackend({ client, prefix: '', timeoutMs: 7, denyCache: undefined }).prefix, '')
  t.equal(redisBackend({ client, prefix: 'x:', timeoutMs: 7 }).timeoutMs, 7)
  t.equal(redisBackend({ client, denyCache: false }).limiter('a', fixed).cache, undefined)
  t.equal(redisBackend({ client, denyCache: { maxEntries: 3 } }).limiter('a', fixed).cache?.maxEntries, 3)
})

t.test('options: every invalid one is a RatesInvalidArgumentError naming it and showing the value', async (t) => {
  const client = fake(never)
  const cases: Array<[unknown, string, RegExp]> = [
    [undefined, 'options', /Expected `options` to be an object \{ client, prefix\?, timeoutMs\?, denyCache\?, leases\? \}, got undefined/],
    [null, 'options', /got null/],
    ['redis', 'options', /got 'redis'/],
    [[client], 'options', /to be an object/],
    [Object.assign(Object.create(null), { client }), 'options', /to be an object/],
    [{ client, maxIdentities: 5 }, 'options.maxIdentities', /Expected `options.maxIdentities` to be one of client, prefix, timeoutMs, denyCache, leases \(unknown option\), got 5/],
    [{ client, [Symbol('s')]: 1 }, 'options.Symbol(s)', /unknown option/],
    [{}, 'options.client', /Expected `options.client` to be a Redis client with evalsha\(\) and eval\(\) \(an ioredis or iovalkey instance\), got undefined/],
    [{ client: null }, 'options.client', /got null/],
    [{ client: 'redis://localhost' }, 'options.client', /got 'redis:\/\/localhost'/],
    [{ client: { evalsha () {} } }, 'options.client', /evalsha\(\) and eval\(\)/],
    [{ client: { eval () {}, evalsha: 1 } }, 'options.client', /evalsha\(\) and eval\(\)/],
    [{ client, prefix: 5 }, 'options.prefix', /Expected `options.prefix` to be a string without \{ or \} \(the key's hash tag follows it\), got 5/],
    [{ client, prefix: 'app{1}:' }, 'options.prefix', /got 'app\{1\}:'/],
    [{ client, prefix: 'app}' }, 'options.prefix', /hash tag/],
    [{ client, timeoutMs: 0 }, 'options.timeoutMs', /Expected `options.timeoutMs` to be a positive safe integer \(milliseconds\), got 0/],
    [{ client, timeoutMs: -5 }, 'options.timeoutMs', /got -5/],
    [{ client, timeoutMs: 1.5 }, 'options.timeoutMs', /got 1.5/],
    [{ client, timeoutMs: '50' }, 'options.timeoutMs', /got '50'/],
    [{ client, timeoutMs: Number.NaN }, 'options.timeoutMs', /got NaN/],
    [{ client, denyCache: true }, 'options.denyCache', /Expected `options.denyCache` to be false or an object \{ maxEntries\? \}, got true/],
    [{ client, denyCache: null }, 'options.denyCache', /got null/],
    [{ client, denyCache: [] }, 'options.denyCache', /an object/],
    [{ client, denyCache: { size: 5 } }, 'options.denyCache.size', /unknown option/],
    [{ client, denyCache: { maxEntries: 0 } }, 'options.denyCache.maxEntries', /Expected `options.denyCache.maxEntries` to be a positive safe integer, got 0/],
    [{ client, denyCache: { maxEntries: 2.5 } }, 'options.denyCache.maxEntries', /got 2.5/],
    [{ client, denyCache: { maxEntries: '10' } }, 'options.denyCache.maxEntries', /got '10'/]
  ]
  for (const [options, path, message] of cases) {
    const error = (() => { try { redisBackend(options as never) } catch (e) { return e } })()
    t.ok(error instanceof RatesInvalidArgumentError, path)
    t.match(error, { code: 'RATES_INVALID_ARGUMENT', path }, path)
    t.match((error as Error).message, message, path)
  }
})

t.test('limiters: one per address; another policy at the same address conflicts', async (t) => {
  const backend = redisBackend({ client: fake(never) })
  const a = backend.limiter('app#a', fixed)
  t.equal(backend.limiter('app#a', { ...fixed }), a, 'the same policy: the same limiter')
  t.equal(a.policy, fixed)
  t.equal(a.address, 'app#a')
  t.equal(a.keyOf('salice'), 'admission:{app#a:salice}')
  const error = (() => { try { backend.limiter('app#a', bucket) } catch (e) { return e } })()
  t.ok(error instanceof RatesPolicyConflictError)
  t.match(error, { limiterName: 'app#a', existing: fixed, requested: bucket })
  t.not(backend.limiter('app#b', bucket), a)
})

t.test('stop: limiter() throws, consume() rejects with RATES_STOPPED; a call in flight still settles', async (t) => {
  // The reply comes when the test gives it, after stop().
  const reply = deferred()
  const client = fake(() => reply.promise)
  const backend = redisBackend({ client, timeoutMs: 10_000 })
  const limiter = backend.limiter('app#a', fixed)
  const inFlight = limiter.consume('sx', 1)
  t.equal(backend.isStopped, false)
  await backend.stop()
  t.equal(backend.isStopped, true)
  t.throws(() => backend.limiter('app#a', fixed), RatesStoppedError)
  t.throws(() => backend.limiter('app#new', fixed), { code: 'RATES_STOPPED', limiterName: 'app#new' })
  const stopped = await rejection(limiter.consume('sx', 1))
  t.ok(stopped instanceof RatesStoppedError)
  t.match(stopped, { code: 'RATES_STOPPED', limiterName: 'app#a' })
  reply.resolve([0, 1, 2, 0, 5000, 4000, 5000])
  t.same(await inFlight, { allowed: true, denied: false, remaining: 2, resetAt: 5000, moreAt: 5000 })
  t.equal(client.calls.length, 1, 'no call after stop')
  await backend.stop()
})

t.test('one EVALSHA per decision: the script SHA, one key, the fingerprint and the cost', async (t) => {
  const client = fake(async () => [0, 1, 2, 0, 5000, 4000, 4100])
  const backend = redisBackend({ client, prefix: 'p:' })
  await backend.limiter('app#a', bucket).consume('T2:sa2:n1', 3)
  t.same(client.calls, [['evalsha', [DECIDE_SHA, '1', 'p:{app#a:T2:sa2:n1}', 'token-bucket:10:1000:10', '3']]])
})

t.test('NOSCRIPT, and only NOSCRIPT, falls back to EVAL once', async (t) => {
  const noscript = new Error('NOSCRIPT No matching script. Please use EVAL.')
  const client = fake(async (method) => {
    if (method === 'evalsha') throw noscript
    return [0, 1, 2, 0, 5000, 4000, 5000]
  })
  const limiter = redisBackend({ client }).limiter('app#a', fixed)
  t.match(await limiter.consume('sx', 1), { allowed: true, remaining: 2 })
  t.same(client.calls.map(([method]) => method), ['evalsha', 'eval'])
  t.equal(client.calls[1]?.[1][0], DECIDE_LUA)
  t.same(client.calls[1]?.[1].slice(1), ['1', 'admission:{app#a:sx}', 'fixed-window:3:1000', '1'])

  const evalFails = fake(async (method) => { throw method === 'evalsha' ? noscript : new Error('OOM command not allowed') })
  const failed = await rejection(redisBackend({ client: evalFails }).limiter('app#a', fixed).consume('sx', 1))
  t.ok(failed instanceof RatesUnavailableError)
  t.match(failed, { code: 'RATES_UNAVAILABLE', message: /Redis failed: OOM command not allowed/ })
  t.same(evalFails.calls.map(([method]) => method), ['evalsha', 'eval'], 'EVAL once, not again')

  const other = fake(async () => { throw new Error('ERR Error running script: something') })
  const error = await rejection(redisBackend({ client: other }).limiter('app#a', fixed).consume('sx', 1))
  t.match(error, { code: 'RATES_UNAVAILABLE', cause: { message: /ERR Error running script/ } })
  t.same(other.calls.map(([method]) => method), ['evalsha'], 'no EVAL for another error')
})

t.test('failures of the client are RATES_UNAVAILABLE with the cause', async (t) => {
  const thrown = new TypeError('the client threw')
  const sync = fake(() => { throw thrown })
  const error = await rejection(redisBackend({ client: sync }).limiter('app#a', fixed).consume('sx', 1))
  t.ok(error instanceof RatesUnavailableError)
  t.equal((error as Error).cause, thrown)
  t.match((error as Error).message, /^The rates backend cannot decide: Redis failed: the client threw$/)

  const notAnError = fake(async () => { throw 'Connection is closed.' as unknown })
  const odd = await rejection(redisBackend({ client: notAnError }).limiter('app#a', fixed).consume('sx', 1))
  t.match(odd, { code: 'RATES_UNAVAILABLE', cause: 'Connection is closed.', message: /Redis failed: Connection is closed\./ })
})

/** A promise the test settles by hand. */
function deferred (): { promise: Promise<unknown>, resolve: (value: unknown) => void, reject: (error: unknown) => void } {
  let resolve!: (value: unknown) => void
  let reject!: (error: unknown) => void
  const promise = new Promise<unknown>((res, rej) => { resolve = res; reject = rej })
  return { promise, resolve, reject }
}

/** Runs `fn`, recording the delay of every timer it arms synchronously. */
function armedBy<T> (fn: () => T): { result: T, delays: unknown[] } {
  const delays: unknown[] = []
  const real = globalThis.setTimeout
  globalThis.setTimeout = ((callback: () => void, ms?: number) => {
    delays.push(ms)
    return real(callback, ms)
  }) as typeof setTimeout
  try {
    return { result: fn(), delays }
  } finally {
    globalThis.setTimeout = real
  }
}

const turns = async (n: number): Promise<void> => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve))
}

t.test('timeout: no answer within timeoutMs rejects with RATES_UNAVAILABLE; a late answer is dropped', async (t) => {
  // A client that never answers: only the backend's own timer can end the decision. What is
  // checked is that timer (armed with timeoutMs, never firing early), not how late a busy machine
  // runs it.
  const limiter = redisBackend({ client: fake(never), timeoutMs: 20 }).limiter('app#a', fixed)
  const started = performance.now()
  const { result, delays } = armedBy(() => limiter.consume('sx', 1))
  t.same(delays, [20], 'one timer, armed with timeoutMs')
  const error = await rejection(result)
  const elapsed = performance.now() - started
  t.ok(error instanceof RatesUnavailableError)
  t.match((error as Error).message, /Redis did not answer within 20 ms/)
  t.equal((error as RatesUnavailableError).retryAfterMs, undefined)
  t.ok(elapsed >= 19, `not before the timeout: rejected after ${elapsed.toFixed(1)} ms`)

  // Answers, failures and NOSCRIPTs that come after the timeout change nothing (and EVAL is not
  // sent for a decision that already failed). "After": the test settles them once the decision
  // has rejected.
  const outcomes: Array<[string, (d: ReturnType<typeof deferred>) => void]> = [
    ['a late answer', (d) => { d.resolve([0, 1, 2, 0, 5000, 4000, 5000]) }],
    ['a late failure', (d) => { d.reject(new Error('ERR late')) }],
    ['a late NOSCRIPT', (d) => { d.reject(new Error('NOSCRIPT late')) }]
  ]
  for (const [what, settle] of outcomes) {
    const reply = deferred()
    const client = fake(() => reply.promise)
    const decision = redisBackend({ client, timeoutMs: 10 }).limiter('app#a', fixed).consume('sx', 1)
    let outcome: unknown
    decision.then((d) => { outcome = d }, (e: unknown) => { outcome = e })
    const late = await rejection(decision)
    t.match(late, { code: 'RATES_UNAVAILABLE', message: /within 10 ms/ }, what)
    settle(reply)
    await turns(3)
    t.equal(outcome, late, `${what}: the decision stays rejected`)
    t.same(client.calls.map(([method]) => method), ['evalsha'], `${what}: no EVAL after the timeout`)
  }

  // An answer in time clears the timer: nothing fires later, and the process is not held up.
  const { result: quick, delays: quickDelays } = armedBy(() => redisBackend({ client: fake(async () => [0, 1, 2, 0, 5000, 4000, 5000]), timeoutMs: 30 }).limiter('app#a', fixed).consume('sx', 1))
  t.same(quickDelays, [30])
  t.match(await quick, { allowed: true })
})

t.test('replies the backend does not understand are RATES_UNAVAILABLE; a stored policy is a conflict', async (t) => {
  const cases: Array<[unknown, RegExp]> = [
    ['OK', /unexpected reply from the script for "admission:\{app#a:sx\}": "OK"/],
    [null, /unexpected reply.*: null/],
    [[], /unexpected reply/],
    [[0, 5, 1, 0, 1, 1, 1], /unexpected reply.*\[0,5,1,0,1,1,1\]/],
    [[0, 1, 1, 0, 1, 1], /unexpected reply.*\[0,1,1,0,1,1\]/], // an admission without moreAt (the shape before it)
    [[0, 1, 1, 0, 1], /unexpected reply/],
    [[0, 1, 1, 0, 1, 1, 1, 1], /unexpected reply/],
    [[0, 1, 1.5, 0, 1, 1, 1], /unexpected reply/],
    [[0, 1, '1', 0, 1, 1, 1], /unexpected reply/],
    [[0, 1, 1, 0, 1, 1, 1.5], /unexpected reply/],
    [[0, 0, 0, 1, 1, 1, 1], /unexpected reply/],
    [[0, 0, 0, 1, 1, 1, 5, 6], /unexpected reply.*\[0,0,0,1,1,1,5,6\]/], // a denial without moreAt (the shape before it)
    [[0, 0, 0, 1, 1, 1, 1, 5, 6, 7], /unexpected reply/],
    [[2], /unexpected reply.*\[2\]/],
    [[1], /unexpected reply/],
    [[1, 5], /unexpected reply/],
    [[1, 'gcra:1:1', 'x'], /unexpected reply/],
    [[1, 'hello'], /the key "admission:\{app#a:sx\}" holds a value this backend did not write/],
    [[1, ''], /did not write/],
    [[1, 'fixed-window:0:1000'], /did not write/],
    [[1, 'fixed-window:3:1000:'], /did not write/]
  ]
  for (const [reply, message] of cases) {
    const error = await rejection(redisBackend({ client: fake(async () => reply), denyCache: false }).limiter('app#a', fixed).consume('sx', 1))
    t.ok(error instanceof RatesUnavailableError, JSON.stringify(reply))
    t.match((error as Error).message, message, JSON.stringify(reply))
  }
  const conflicts: Array<[string, Policy]> = [
    ['gcra:5:60000:2', { algorithm: 'gcra', limit: 5, windowMs: 60000, burst: 2 }],
    ['sliding-window-counter:3:1000', { algorithm: 'sliding-window-counter', limit: 3, windowMs: 1000 }],
    ['fixed-window:4:1000', { algorithm: 'fixed-window', limit: 4, windowMs: 1000 }]
  ]
  for (const [fingerprint, existing] of conflicts) {
    const error = await rejection(redisBackend({ client: fake(async () => [1, fingerprint]) }).limiter('app#a', fixed).consume('sx', 1))
    t.ok(error instanceof RatesPolicyConflictError, fingerprint)
    t.same((error as RatesPolicyConflictError).existing, existing)
    t.ok(Object.isFrozen((error as RatesPolicyConflictError).existing))
    t.equal((error as RatesPolicyConflictError).requested, fixed)
    t.equal((error as RatesPolicyConflictError).limiterName, 'app#a')
  }
  t.same(policyOfFingerprint('token-bucket:10:1000'), { algorithm: 'token-bucket', limit: 10, windowMs: 1000 })
  t.equal(policyOfFingerprint('token-bucket:10:01000'), undefined)
})

// ---- the deny cache, deterministic (fake Redis, one test clock) -------------------------------

/** A fake Redis that runs the kernels' semantics for one fixed-window identity: counts, window 1000. */
function scriptedFixed (clock: { now: number }, serverSkew = 0): RedisScriptClient & { calls: number } {
  let count = 0
  let start = 0
  const client = {
    calls: 0,
    async evalsha (_sha: string, _n: number, _key: string, _fp: string, costText: string) {
      client.calls++
      const now = clock.now + serverSkew
      const cost = Number(costText)
      const current = Math.floor(now / 1000) * 1000
      if (current > start) { start = current; count = 0 }
      if (count + cost <= 3) {
        count += cost
        return [0, 1, 3 - count, 0, start + 1000, now, count === 0 ? now : start + 1000]
      }
      // moreAt: nothing comes back before the window ends, then all of it.
      return [0, 0, 3 - count, start + 1000 - now, start + 1000, now, count === 0 ? now : start + 1000, start, count]
    },
    async eval () { throw new Error('unused') }
  }
  return client
}

const fields = (d: RateDecision): unknown => ({ ...d })

t.test('deny cache: a denied identity is denied locally while certain; smaller costs, expiry and admits go to Redis', async (t) => {
  const clock = { now: 10_000 }
  const client = scriptedFixed(clock)
  const backend = testingRedisBackend({ client, denyCache: { maxEntries: 2 } }, { now: () => clock.now })
  const limiter = backend.limiter('app#a', fixed)
  const cache = limiter.cache
  t.ok(cache)
  t.same(fields(await limiter.consume('sx', 2)), { allowed: true, denied: false, remaining: 1, resetAt: 11_000, moreAt: 11_000 })
  t.same(fields(await limiter.consume('sx', 2)), { allowed: false, denied: true, remaining: 1, retryAfterMs: 1000, resetAt: 11_000, moreAt: 11_000 })
  t.equal(client.calls, 2)
  t.equal(cache?.size, 1)

  clock.now = 10_400
  t.same(fields(await limiter.consume('sx', 2)), { allowed: false, denied: true, remaining: 1, retryAfterMs: 600, resetAt: 11_000, moreAt: 11_000 }, 'same cost: local')
  t.same(fields(await limiter.consume('sx', 3)), { allowed: false, denied: true, remaining: 1, retryAfterMs: 600, resetAt: 11_000, moreAt: 11_000 }, 'larger cost: local')
  t.equal(client.calls, 2, 'no round trip')
  t.same(fields(await limiter.consume('sx', 1)), { allowed: true, denied: false, remaining: 0, resetAt: 11_000, moreAt: 11_000 }, 'a smaller cost that may pass: Redis')
  t.equal(client.calls, 3)
  t.equal(cache?.size, 0, 'an admit forgets the identity')
  t.match(await limiter.consume('sx', 1), { allowed: false, retryAfterMs: 600 })
  t.equal(client.calls, 4)
  t.match(await limiter.consume('sx', 1), { allowed: false, retryAfterMs: 600 })
  t.equal(client.calls, 4, 'now even cost 1 is denied locally')

  clock.now = 11_000
  t.match(await limiter.consume('sx', 3), { allowed: true, remaining: 0 }, 'recovered: the entry has expired, Redis admits')
  t.equal(client.calls, 5)
  t.equal(cache?.size, 0)

  // Bounded: the entry remembered longest ago goes first.
  await limiter.consume('sx', 1)
  const identities = ['sa', 'sb', 'sc']
  for (const id of identities) {
    await limiter.consume(id, 3)
    t.match(await limiter.consume(id, 3), { allowed: false })
  }
  t.equal(cache?.size, 2)
  const before = client.calls
  await limiter.consume('sb', 3)
  await limiter.consume('sc', 3)
  t.equal(client.calls, before, 'the two latest are cached')
  await limiter.consume('sa', 3)
  t.equal(client.calls, before + 1, 'the oldest was dropped')

  await backend.stop()
  t.equal(cache?.size, 0, 'stop clears it')
})

t.test('deny cache: with a round trip of uncertainty, it denies only when certain and is never early', async (t) => {
  // The server's clock runs 5000 ms ahead of the local one; the reply takes 30 local ms, and the
  // server read its clock 10 ms after the request was sent.
  const clock = { now: 0 }
  const policy: Policy = { algorithm: 'token-bucket', limit: 10, windowMs: 1000, burst: 10 }
  let replies: unknown[] = []
  const client = fake(async () => {
    clock.now += 30
    return replies.shift()
  })
  const limiter = testingRedisBackend({ client }, { now: () => clock.now }).limiter('app#a', policy)
  // Denied at server time 5010 (sent at local 0, received at 30): 10 units of 1/1000 token left,
  // cost 5 needs 4990 more: 499 ms; one whole token needs 990 more: at 5010 + 99.
  replies = [[0, 0, 0, 499, 5010 + 999, 5010, 5010 + 99, 10, 5010]]
  t.match(await limiter.consume('sx', 5), { allowed: false, remaining: 0, retryAfterMs: 499 })
  t.equal(client.calls.length, 1)

  // Local 130: the server reads between 5010 + 100 and 5010 + 130.
  clock.now = 130
  const d = await limiter.consume('sx', 5)
  t.equal(client.calls.length, 1, 'denied locally')
  // Passes at server 5509. Latest server time now 5140 (the kernel's retry 369); earliest 5110,
  // so waiting 399 local ms surely reaches 5509 on the server.
  // The next unit, from the latest time: 1.31 tokens, the second whole one at 5140 + 69.
  t.same(fields(d), { allowed: false, denied: true, remaining: 1, retryAfterMs: 399, resetAt: 6009, moreAt: 5209 })
  // Cost 2: 1.31 tokens even at the latest server time → denied locally too.
  t.match(await limiter.consume('sx', 2), { allowed: false })
  t.equal(client.calls.length, 1)
  // Cost 1: 1.4 tokens at the latest time, it may pass: ask Redis.
  replies = [[0, 1, 0, 0, 6009, 5170, 5209]]
  t.match(await limiter.consume('sx', 1), { allowed: true })
  t.equal(client.calls.length, 2)

  // Within 499 - 1 of sending, a cost-5 request is certain to be denied; from sent + 499 it may pass.
  replies = [[0, 0, 0, 499, 5010 + 999, 5010, 5010 + 99, 10, 5010]]
  clock.now = 1000
  await limiter.consume('sx', 5) // sent at 1000, received at 1030, state as at server 5010
  clock.now = 1000 + 498
  t.match(await limiter.consume('sx', 5), { allowed: false, retryAfterMs: 1 + 30 })
  t.equal(client.calls.length, 3, 'still certain: local')
  clock.now = 1000 + 499
  replies = [[0, 1, 0, 0, 6009, 5510, 5609]]
  t.match(await limiter.consume('sx', 5), { allowed: true })
  t.equal(client.calls.length, 4, 'no longer certain: Redis')
})

// ---- the deny cache against the shared Redis ---------------------------------------------------

const shared = await sharedRedis()
const skip = 'skip' in shared ? shared.skip : false
const redis = 'redis' in shared ? shared.redis : (undefined as never)
if (!skip) t.teardown(() => redis.quit())

t.test('deny cache on Redis: N requests within retryAfterMs, 0 round trips, the decisions Redis gives', { skip }, async (t) => {
  const prefix = uniquePrefix('deny')
  t.teardown(async () => { await deleteKeys(redis, prefix) })
  // On a Redis that has not run the script yet (a fresh CI machine, this test first), the first
  // EVALSHA would meet NOSCRIPT: load it so the count below is about the deny cache only.
  t.equal(await redis.script('LOAD', DECIDE_LUA), DECIDE_SHA)
  const clock = { now: 1_800_000_000_000 }
  const now = (): number => clock.now
  const cachedClient = counting(redis)
  const plainClient = counting(redis)
  const cached = testingRedisBackend({ client: cachedClient, prefix: `${prefix}c:`, timeoutMs: 10_000 }, { now })
  const plain = testingRedisBackend({ client: plainClient, prefix: `${prefix}p:`, timeoutMs: 10_000, denyCache: false }, { now })
  for (const policy of [fixed, bucket, { algorithm: 'sliding-window-counter', limit: 3, windowMs: 1000 }, { algorithm: 'gcra', limit: 10, windowMs: 1000, burst: 3 }] as Policy[]) {
    const c = cached.limiter(`app#${policy.algorithm}`, policy)
    const p = plain.limiter(`app#${policy.algorithm}`, policy)
    const cap = policy.burst ?? policy.limit
    clock.now += 10_000
    const both = async (cost: number): Promise<RateDecision> => {
      const [a, b] = [await c.consume('su', cost), await p.consume('su', cost)]
      t.same(a, b, `${policy.algorithm} at +${clock.now % 10_000}, cost ${cost}`)
      return a
    }
    await both(cap)
    const denied = await both(cap)
    t.equal(denied.allowed, false)
    const calls = cachedClient.calls.evalsha
    const retry = denied.allowed ? 0 : denied.retryAfterMs
    const N = 20
    const step = Math.floor((retry - 1) / N)
    for (let i = 0; i < N; i++) {
      clock.now += step
      t.match(await both(cap), { allowed: false })
    }
    t.equal(cachedClient.calls.evalsha, calls, `${policy.algorithm}: ${N} denials without a round trip`)
    // After the wait, Redis again (and it admits).
    clock.now += retry
    t.match(await both(cap), { allowed: true })
    t.equal(cachedClient.calls.evalsha, calls + 1)
  }
  t.equal(plainClient.calls.eval + cachedClient.calls.eval, 0)
})

t.test('deny cache on Redis, real clocks: saves the round trips, its retryAfterMs is never early', { skip }, async (t) => {
  const prefix = uniquePrefix('deny-real')
  t.teardown(async () => { await deleteKeys(redis, prefix) })
  const client = counting(redis)
  // An emission interval of 500 ms: cost 2 is denied for about a second after the burst, far
  // longer than 50 local answers take even on a busy machine.
  const limiter = redisBackend({ client, prefix, timeoutMs: 10_000 }).limiter('app#g', { algorithm: 'gcra', limit: 10, windowMs: 5000, burst: 2 })
  t.match(await limiter.consume('su', 2), { allowed: true, remaining: 0 })
  const first = await limiter.consume('su', 2)
  t.match(first, { allowed: false, remaining: 0 })
  const calls = client.calls.evalsha
  let last = first
  for (let i = 0; i < 50; i++) {
    last = await limiter.consume('su', 2)
    t.equal(last.allowed, false)
  }
  t.equal(client.calls.evalsha, calls, '50 denials, no round trip')
  if (!last.allowed && !first.allowed) {
    t.ok(last.retryAfterMs <= first.retryAfterMs + 5, `retry ${last.retryAfterMs} ≤ ${first.retryAfterMs} (+ a round trip)`)
    await sleep(last.retryAfterMs)
  }
  t.match(await limiter.consume('su', 2), { allowed: true }, 'admitted after waiting the cached retryAfterMs')
  t.equal(client.calls.evalsha, calls + 1)
})
