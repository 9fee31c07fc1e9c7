// The rates capability through the real plugin: decisions, the seed's example, cost and options,
// identities, handles and conflicts. The clock is injected into the memory backend: no sleeping.
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import admission, {
  memoryBackend, MemoryBackend,
  RatesError, RatesInvalidArgumentError, RatesPolicyConflictError, RatesStoppedError, RatesUnavailableError,
  type RateDecision, type RateLimiter, type RatePolicy
} from '../../lib/index.js'
import * as errors from '../../lib/rates/errors.js'
import * as memory from '../../lib/backends/memory/memory-backend.js'
import { rejection, thrown } from '../helpers/errors.js'

/** 2023-11-14T22:13:20Z: a multiple of 1000 (and of 2500), so window starts are easy to read. */
const T0 = 1_700_000_000_000

interface Clock { now: number }

async function build (t: Tap, clock: Clock, options: { maxIdentities?: number } = {}): Promise<FastifyInstance> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend: memoryBackend({ ...options, clock: () => clock.now }), rateLimit: false })
  return app
}
type Tap = Test

const ALLOWED_KEYS = ['allowed', 'denied', 'remaining', 'resetAt', 'moreAt']
const DENIED_KEYS = ['allowed', 'denied', 'remaining', 'retryAfterMs', 'resetAt', 'moreAt']

t.test('the package exports the backend and every error class', async (t) => {
  t.equal(memoryBackend, memory.memoryBackend)
  t.equal(MemoryBackend, memory.MemoryBackend)
  t.equal(RatesError, errors.RatesError)
  t.equal(RatesInvalidArgumentError, errors.RatesInvalidArgumentError)
  t.equal(RatesPolicyConflictError, errors.RatesPolicyConflictError)
  t.equal(RatesUnavailableError, errors.RatesUnavailableError)
  t.equal(RatesStoppedError, errors.RatesStoppedError)
  t.ok(memoryBackend() instanceof MemoryBackend)
})

t.test('decision shapes, exact values, resetAt and moreAt in epoch ms of the injected clock', async (t) => {
  const clock = { now: T0 }
  const app = await build(t, clock)

  t.test('token-bucket', async (t) => {
    const l = app.rates.use('tb', { algorithm: 'token-bucket', limit: 10, windowMs: 1000 })
    clock.now = T0
    const first = await l.consume('u')
    // A token every 100 ms: moreAt is the next whole one, resetAt the last one back.
    t.strictSame(first, { allowed: true, denied: false, remaining: 9, resetAt: T0 + 100, moreAt: T0 + 100 })
    t.strictSame(Object.keys(first), ALLOWED_KEYS)
    t.notOk('retryAfterMs' in first, 'an allow has no retryAfterMs at all')
    t.strictSame(await l.consume('u', { cost: 9 }), { allowed: true, denied: false, remaining: 0, resetAt: T0 + 1000, moreAt: T0 + 100 }, 'empty: full in 1 s, one more in 100 ms')
    const denied = await l.consume('u')
    t.strictSame(denied, { allowed: false, denied: true, remaining: 0, retryAfterMs: 100, resetAt: T0 + 1000, moreAt: T0 + 100 })
    t.strictSame(Object.keys(denied), DENIED_KEYS)
    clock.now = T0 + 250
    t.strictSame(await l.consume('u', { cost: 3 }), { allowed: false, denied: true, remaining: 2, retryAfterMs: 50, resetAt: T0 + 1000, moreAt: T0 + 300 }, '2.5 tokens: the third at T0 + 300')
    t.strictSame(await l.consume('u', { cost: 2 }), { allowed: true, denied: false, remaining: 0, resetAt: T0 + 1200, moreAt: T0 + 300 }, '0.5 left: a whole one at T0 + 300')
  })

  t.test('fixed-window', async (t) => {
    const l = app.rates.use('fw', { algorithm: 'fixed-window', limit: 3, windowMs: 1000 })
    clock.now = T0 + 250
    // Nothing comes back before the window ends, then all of it: moreAt is resetAt.
    t.strictSame(await l.consume('u'), { allowed: true, denied: false, remaining: 2, resetAt: T0 + 1000, moreAt: T0 + 1000 })
    t.strictSame(await l.consume('u', { cost: 2 }), { allowed: true, denied: false, remaining: 0, resetAt: T0 + 1000, moreAt: T0 + 1000 })
    const denied = await l.consume('u')
    t.strictSame(denied, { allowed: false, denied: true, remaining: 0, retryAfterMs: 750, resetAt: T0 + 1000, moreAt: T0 + 1000 })
    t.strictSame(Object.keys(denied), DENIED_KEYS)
    clock.now = T0 + 1000
    t.strictSame(await l.consume('u'), { allowed: true, denied: false, remaining: 2, resetAt: T0 + 2000, moreAt: T0 + 2000 }, 'a new window')
  })

  t.test('sliding-window-counter', async (t) => {
    const l = app.rates.use('swc', { algorithm: 'sliding-window-counter', limit: 4, windowMs: 1000 })
    clock.now = T0
    // With c counted, i + 1 = 4 - c + 1 more units fit once the next window has begun and the
    // previous c weigh c - 1 at most: 1/c of the window into it.
    const moreAt = [T0 + 2000, T0 + 1500, T0 + 1334, T0 + 1250]
    for (let i = 3; i >= 0; i--) {
      t.strictSame(await l.consume('u'), { allowed: true, denied: false, remaining: i, resetAt: T0 + 2000, moreAt: moreAt[3 - i] }, `${4 - i} counted`)
    }
    // 4 in the current window: wait for the next one, then for 1/4 of the previous to slide out.
    t.strictSame(await l.consume('u'), { allowed: false, denied: true, remaining: 0, retryAfterMs: 1250, resetAt: T0 + 2000, moreAt: T0 + 1250 })
    clock.now = T0 + 1250
    // previous 4 weighted by 750/1000 = 3 → room for 1; one more once they weigh 2, at T0 + 1500.
    t.strictSame(await l.consume('u'), { allowed: true, denied: false, remaining: 0, resetAt: T0 + 3000, moreAt: T0 + 1500 })
  })

  t.test('gcra', async (t) => {
    const l = app.rates.use('gcra', { algorithm: 'gcra', limit: 2, windowMs: 1000 })
    clock.now = T0
    // A unit every 500 ms.
    t.strictSame(await l.consume('u'), { allowed: true, denied: false, remaining: 1, resetAt: T0 + 500, moreAt: T0 + 500 })
    t.strictSame(await l.consume('u'), { allowed: true, denied: false, remaining: 0, resetAt: T0 + 1000, moreAt: T0 + 500 })
    t.strictSame(await l.consume('u'), { allowed: false, denied: true, remaining: 0, retryAfterMs: 500, resetAt: T0 + 1000, moreAt: T0 + 500 })
    clock.now = T0 + 500
    t.strictSame(await l.consume('u'), { allowed: true, denied: false, remaining: 0, resetAt: T0 + 1500, moreAt: T0 + 1000 })
  })

  t.test('a deny is a value: a plain, distinct object per decision', async (t) => {
    const l = app.rates.use('value', { algorithm: 'fixed-window', limit: 1, windowMs: 1000 })
    clock.now = T0
    await l.consume('v')
    const a = await l.consume('v')
    const b = await l.consume('v')
    t.equal(a.denied, true)
    t.not(a, b)
    t.equal(Object.getPrototypeOf(a), Object.prototype)
  })
})

t.test("the seed's example: 100 sends pass, the 101st is denied, another identity has its own quota", async (t) => {
  const clock = { now: T0 + 12_345 }
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend: memoryBackend({ clock: () => clock.now }), rateLimit: false })
  let send!: RateLimiter
  await app.register(async function messaging (child) {
    send = child.rates.use('send-message', { algorithm: 'sliding-window-counter', limit: 100, windowMs: 60_000 })
    // The mapping of a decision to a 429 in a route.
    child.post<{ Body: { tenantId: string, userId: string } }>('/send', async (request, reply) => {
      const d = await send.consume({ tenantId: request.body.tenantId, userId: request.body.userId }, { cost: 1 })
      if (d.denied) return reply.code(429).header('retry-after', Math.ceil(d.retryAfterMs / 1000)).send({ retryAfterMs: d.retryAfterMs })
      return reply.code(204).send()
    })
  })
  await app.ready()

  const alice = { tenantId: 't1', userId: 'alice' }
  for (let i = 1; i <= 100; i++) {
    const d = await send.consume(alice, { cost: 1 })
    if (!d.allowed || d.remaining !== 100 - i) t.fail(`send ${i}: ${JSON.stringify(d)}`)
  }
  const denied = await send.consume(alice, { cost: 1 })
  t.equal(denied.denied, true, 'the 101st is denied')
  t.equal(denied.allowed, false)
  t.equal(denied.remaining, 0)
  // The window started at floor(now / 60 000) * 60 000; the next one starts 60 000 - 12 345 ms later,
  // and 1/100 of the previous window must slide out: 600 ms more.
  const windowStart = Math.floor(clock.now / 60_000) * 60_000
  t.equal((denied as { retryAfterMs: number }).retryAfterMs, windowStart + 60_000 - clock.now + 600)
  t.equal(denied.resetAt, windowStart + 120_000)
  t.equal((await send.consume({ userId: 'alice', tenantId: 't1' })).denied, true, 'field order does not make another identity')

  const bob = await send.consume({ tenantId: 't1', userId: 'bob' }, { cost: 1 })
  // 100 units again only once bob's one has slid out: moreAt is his full capacity.
  t.strictSame(bob, { allowed: true, denied: false, remaining: 99, resetAt: windowStart + 120_000, moreAt: windowStart + 120_000 }, 'bob has his own quota')
  t.equal((await send.consume({ tenantId: 't2', userId: 'alice' })).allowed, true, 'so does alice in another tenant')

  const viaHttp = await app.inject({ method: 'POST', url: '/send', payload: alice })
  t.equal(viaHttp.statusCode, 429)
  t.equal(viaHttp.headers['retry-after'], String(Math.ceil((denied as { retryAfterMs: number }).retryAfterMs / 1000)))
  t.equal((await app.inject({ method: 'POST', url: '/send', payload: { tenantId: 't3', userId: 'carol' } })).statusCode, 204)
})

t.test('identities of different types are different quotas', async (t) => {
  const clock = { now: T0 }
  const app = await build(t, clock)
  const l = app.rates.use('typed', { algorithm: 'fixed-window', limit: 1, windowMs: 1000 })
  for (const identity of ['1', 1, 1n, true, 'true', ['1'], [1], { id: 1 }, { id: '1' }]) {
    t.equal((await l.consume(identity)).allowed, true, `${typeof identity} ${String(identity)}: its own quota`)
  }
  t.equal((await l.consume([1])).denied, true)
  t.equal((await l.consume({ id: 1 })).denied, true)
})

t.test('cost: default 1, up to the capacity, otherwise a rejection', async (t) => {
  const clock = { now: T0 }
  const app = await build(t, clock)

  t.test('the default is 1', async (t) => {
    const l = app.rates.use('default-cost', { algorithm: 'fixed-window', limit: 10, windowMs: 1000 })
    t.equal((await l.consume('u')).remaining, 9)
    t.equal((await l.consume('u', {})).remaining, 8)
    t.equal((await l.consume('u', { cost: undefined })).remaining, 7)
    t.equal((await l.consume('u', undefined)).remaining, 6)
    t.equal((await l.consume('u', { cost: 1 })).remaining, 5)
    t.equal((await l.consume('u', { cost: 5 })).remaining, 0)
  })

  const capacities: Array<[RatePolicy, number]> = [
    [{ algorithm: 'token-bucket', limit: 10, windowMs: 1000 }, 10],
    [{ algorithm: 'token-bucket', limit: 10, windowMs: 1000, burst: 25 }, 25],
    [{ algorithm: 'token-bucket', limit: 10, windowMs: 1000, burst: 3 }, 3],
    [{ algorithm: 'gcra', limit: 10, windowMs: 1000 }, 10],
    [{ algorithm: 'gcra', limit: 10, windowMs: 1000, burst: 25 }, 25],
    [{ algorithm: 'fixed-window', limit: 7, windowMs: 1000 }, 7],
    [{ algorithm: 'sliding-window-counter', limit: 7, windowMs: 1000 }, 7]
  ]
  let n = 0
  for (const [policy, capacity] of capacities) {
    t.test(`${JSON.stringify(policy)}: capacity ${capacity}`, async (t) => {
      const l = app.rates.use(`capacity-${n++}`, policy)
      const error = await rejection(t, () => l.consume('u', { cost: capacity + 1 }))
      t.type(error, RatesInvalidArgumentError)
      t.match(error, { code: 'RATES_INVALID_ARGUMENT', path: 'cost', value: capacity + 1 })
      t.match((error as Error).message, `at most the policy's capacity (${capacity})`)
      const full = await l.consume('u', { cost: capacity })
      t.strictSame([full.allowed, full.remaining], [true, 0], 'the rejected cost took nothing; the capacity passes at once')
    })
  }

  t.test('invalid costs reject with RatesInvalidArgumentError at path cost and take nothing', async (t) => {
    const l = app.rates.use('bad-cost', { algorithm: 'fixed-window', limit: 5, windowMs: 1000 })
    for (const cost of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, '1', 1n, null, true, {}, [1]]) {
      const error = await rejection(t, () => l.consume('u', { cost } as never))
      t.type(error, RatesInvalidArgumentError, `cost ${String(cost)}`)
      t.match(error, { code: 'RATES_INVALID_ARGUMENT', path: 'cost' })
      t.ok(Object.is((error as RatesInvalidArgumentError).value, cost), 'value is what was given')
    }
    t.equal((await l.consume('u')).remaining, 4, 'nothing was taken')
  })
})

t.test('the options object: an exact plain object { cost? }, else a rejection', async (t) => {
  const clock = { now: T0 }
  const app = await build(t, clock)
  const l = app.rates.use('options', { algorithm: 'fixed-window', limit: 5, windowMs: 1000 })
  class Options { cost = 1 }
  const symbol = Symbol('cost')
  const cases: Array<[unknown, string]> = [
    [null, 'options'],
    [1, 'options'],
    ['cost', 'options'],
    [true, 'options'],
    [[], 'options'],
    [[1], 'options'],
    [() => 1, 'options'],
    [Object.create(null), 'options'],
    [new Options(), 'options'],
    [{ cost: 1, extra: true }, 'options.extra'],
    [{ Cost: 1 }, 'options.Cost'],
    [{ [symbol]: 1 }, 'options.Symbol(cost)']
  ]
  for (const [options, path] of cases) {
    const error = await rejection(t, () => l.consume('u', options as never))
    t.type(error, RatesInvalidArgumentError, `options at ${path}`)
    t.match(error, { code: 'RATES_INVALID_ARGUMENT', path })
  }
  t.equal((await l.consume('u')).remaining, 4, 'nothing was taken')

  // The policies' rule for every options object: a getter is refused, never invoked.
  let invoked = 0
  const error = await rejection(t, () => l.consume('u', { get cost (): number { invoked++; return 2 } }))
  t.match(error, { code: 'RATES_INVALID_ARGUMENT', path: 'options.cost', message: /accessor property \(getter or setter\), which is not invoked/ })
  t.equal(invoked, 0)
  t.equal((await l.consume('u')).remaining, 3, 'nothing was taken')
})

t.test('bad identities reject with RatesInvalidArgumentError and take nothing', async (t) => {
  const clock = { now: T0 }
  const app = await build(t, clock)
  const l = app.rates.use('identities', { algorithm: 'fixed-window', limit: 2, windowMs: 1000 })
  const bad: unknown[] = [
    undefined, null, Number.NaN, Number.POSITIVE_INFINITY, Symbol('s'), () => 1,
    { a: {} }, { a: [1] }, [[1]], [{}], { a: null }, { a: undefined }, new Date(0), new Map(),
    '\uD800', { '\uDC00': 1 }, 'x'.repeat(2000), Array.from({ length: 17 }, (_, i) => i),
    Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, i]))
  ]
  for (const identity of bad) {
    const error = await rejection(t, () => l.consume(identity as never))
    t.type(error, RatesInvalidArgumentError, `identity ${typeof identity}`)
    t.equal((error as RatesError).code, 'RATES_INVALID_ARGUMENT')
  }
  // An identity whose inspection throws still gives a rejection, never a synchronous throw.
  const hostile = new Proxy({}, { getPrototypeOf () { throw new Error('trap') }, ownKeys () { throw new Error('trap') } })
  t.ok(await rejection(t, () => l.consume(hostile as never)))
  t.equal((await l.consume('fine')).remaining, 1)
  t.equal((await l.consume(Array.from({ length: 16 }, (_, i) => i))).allowed, true, '16 items are fine')
})

t.test('handles: same caller, name and normalized policy → the same handle', async (t) => {
  const clock = { now: T0 }
  const app = await build(t, clock)
  const policy: RatePolicy = { algorithm: 'token-bucket', limit: 10, windowMs: 1000 }
  const l = app.rates.use('same', policy)
  t.equal(app.rates.use('same', policy), l)
  t.equal(app.rates.use('same', { ...policy }), l, 'an equal copy')
  t.equal(app.rates.use('same', { windowMs: 1000, limit: 10, algorithm: 'token-bucket' }), l, 'key order does not matter')
  t.equal(app.rates.use('same', { ...policy, burst: 10 }), l, 'the default burst written out')
  t.equal(app.rates.use('same', { ...policy, burst: undefined }), l, 'burst: undefined is absent')
  t.equal(l.name, 'same')
  t.strictSame(l.policy, { algorithm: 'token-bucket', limit: 10, windowMs: 1000, burst: 10 }, 'the normalized policy')
  t.ok(Object.isFrozen(l.policy))
  t.not(l.policy, policy)
  t.notOk(Object.isFrozen(policy), 'the caller’s object is left alone')
  t.ok(Object.isFrozen(app.rates))
  t.not(app.rates.use('other', policy), l, 'another name, another handle')
  t.equal(app.rates, app.rates, 'one rates per context')

  await l.consume('u', { cost: 10 })
  t.equal((await app.rates.use('other', policy).consume('u')).remaining, 9, 'another name, another quota')
  t.equal((await app.rates.use('same', policy).consume('u')).denied, true, 'the same handle, the same quota')
})

t.test('handles: the same name with another policy throws RatesPolicyConflictError synchronously', async (t) => {
  const clock = { now: T0 }
  const app = await build(t, clock)
  const policy: RatePolicy = { algorithm: 'sliding-window-counter', limit: 100, windowMs: 60_000 }
  const l = app.rates.use('send-message', policy)
  const others: RatePolicy[] = [
    { ...policy, limit: 101 },
    { ...policy, windowMs: 60_001 },
    { ...policy, algorithm: 'fixed-window' },
    { algorithm: 'token-bucket', limit: 100, windowMs: 60_000 },
    { algorithm: 'gcra', limit: 100, windowMs: 60_000 }
  ]
  for (const other of others) {
    const error = thrown(() => app.rates.use('send-message', other))
    t.type(error, RatesPolicyConflictError, JSON.stringify(other))
    t.match(error, { code: 'RATES_POLICY_CONFLICT', name: 'RatesPolicyConflictError', limiterName: 'send-message', existing: l.policy })
    t.match((error as RatesPolicyConflictError).requested, other, 'requested: the normalized policy asked for')
    t.ok(Object.isFrozen((error as RatesPolicyConflictError).requested))
    t.match((error as Error).message, /^Rate limiter "send-message" already has the policy /)
  }
  const tb = app.rates.use('tb', { algorithm: 'token-bucket', limit: 10, windowMs: 1000 })
  t.throws(() => app.rates.use('tb', { algorithm: 'token-bucket', limit: 10, windowMs: 1000, burst: 11 }), RatesPolicyConflictError, 'another burst')
  t.equal(app.rates.use('send-message', policy), l, 'a conflict changes nothing')
  t.equal(app.rates.use('tb', { algorithm: 'token-bucket', limit: 10, windowMs: 1000 }), tb)
  t.equal((await l.consume('u')).remaining, 99)
})

t.test('use(): a bad name or a bad policy throws RatesInvalidArgumentError synchronously', async (t) => {
  const clock = { now: T0 }
  const app = await build(t, clock)
  const policy: RatePolicy = { algorithm: 'fixed-window', limit: 1, windowMs: 1000 }
  for (const name of ['', 'x'.repeat(257), 42, undefined, null, Symbol('n'), {}, ['a'], 'a\nb', '\u0000', 'tab\there', '\u007f', '\u0085', '\uD800', 'a\uDC00b']) {
    const error = thrown(() => app.rates.use(name as never, policy))
    t.type(error, RatesInvalidArgumentError, `name ${JSON.stringify(String(name))}`)
    t.match(error, { code: 'RATES_INVALID_ARGUMENT', path: 'name' })
    t.match((error as Error).message, 'a static limiter name')
    t.throws(() => app.rates.global.use(name as never, policy), RatesInvalidArgumentError, 'the global scope checks names alike')
  }
  for (const name of ['x'.repeat(256), 'a', 'send message', 'a/b#c%d?e', '发送消息', '📨', 'platform.tenant-egress']) {
    t.equal(app.rates.use(name, policy).name, name)
  }
  // Names that would look alike once escaped are still different quotas.
  const spaced = app.rates.use('a b', policy)
  const escaped = app.rates.use('a%20b', policy)
  await spaced.consume('u')
  t.equal((await escaped.consume('u')).allowed, true, "'a b' and 'a%20b' are two quotas")

  const badPolicies: Array<[unknown, string]> = [
    [undefined, 'policy'],
    [null, 'policy'],
    ['fixed-window', 'policy'],
    [{ limit: 1, windowMs: 1 }, 'policy.algorithm'],
    [{ algorithm: 'leaky-bucket', limit: 1, windowMs: 1 }, 'policy.algorithm'],
    [{ algorithm: 'fixed-window', limit: 0, windowMs: 1 }, 'policy.limit'],
    [{ algorithm: 'fixed-window', limit: 1, windowMs: 1.5 }, 'policy.windowMs'],
    [{ algorithm: 'fixed-window', limit: 1, windowMs: 1, burst: 1 }, 'policy.burst'],
    [{ algorithm: 'gcra', limit: 1, windowMs: 1, extra: 1 }, 'policy.extra'],
    [{ algorithm: 'token-bucket', limit: 2, windowMs: Number.MAX_SAFE_INTEGER }, 'policy']
  ]
  for (const [bad, path] of badPolicies) {
    const error = thrown(() => app.rates.use('bad-policy', bad as never))
    t.type(error, RatesInvalidArgumentError, JSON.stringify(bad))
    t.match(error, { code: 'RATES_INVALID_ARGUMENT', path })
    t.throws(() => app.rates.global.use('bad-policy', bad as never), RatesInvalidArgumentError)
  }
  const good = app.rates.use('bad-policy', { algorithm: 'gcra', limit: 3, windowMs: 1000 })
  t.equal(good.policy.burst, 3, 'a refused policy registered nothing: the name is still free')
})

t.test('use() returns the handle synchronously; consume() returns a promise', async (t) => {
  const clock = { now: T0 }
  const app = await build(t, clock)
  const l = app.rates.use('shape', { algorithm: 'gcra', limit: 1, windowMs: 1000 })
  const pending = l.consume('u')
  t.type(pending, Promise)
  const decision: RateDecision = await pending
  t.equal(decision.allowed, true)
})
