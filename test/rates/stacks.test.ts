// Stacked policies through the real plugin: rates.use(name, [perSecond, perDay]) gives a
// StackedRateLimiter whose consume passes only when every policy has room (and then each consumes)
// and whose check consumes nothing. The memory backend, its clock injected: no sleeping.
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import admission, {
  memoryBackend,
  RatesInvalidArgumentError, RatesPolicyConflictError, RatesStoppedError, RatesUnavailableError,
  type BackendLimiter, type MemoryBackend, type RatePolicy, type RatesBackend, type StackDecision, type StackedRateLimiter
} from '../../lib/index.js'
import { MAX_STACK_POLICIES } from '../../lib/rates/policy-stack.js'
import { rejection, thrown } from '../helpers/errors.js'

const T0 = 1_700_000_000_000
const DAY = 86_400_000
/** The end of T0's day (fixed windows are aligned to multiples of windowMs). */
const DAY_END = Math.floor(T0 / DAY) * DAY + DAY

const PER_SECOND: RatePolicy = { algorithm: 'token-bucket', limit: 10, windowMs: 1000 }
const PER_DAY: RatePolicy = { algorithm: 'fixed-window', limit: 25, windowMs: DAY }

type Tap = Test
interface Clock { now: number }

async function build (t: Tap, clock: Clock, options: { maxIdentities?: number, backend?: RatesBackend } = {}): Promise<FastifyInstance> {
  const app = Fastify()
  t.teardown(() => app.close())
  const backend = options.backend ?? memoryBackend({ clock: () => clock.now, ...(options.maxIdentities === undefined ? {} : { maxIdentities: options.maxIdentities }) })
  await app.register(admission, { backend, rateLimit: false })
  return app
}

const outcome = (allowed: boolean, remaining: number, retryAfterMs: number, resetAt: number, moreAt: number): StackDecision['policies'][number] =>
  ({ allowed, remaining, retryAfterMs, resetAt, moreAt })

t.test('10 a second and 25 a day: every policy must have room, and a refusal takes from none', async (t) => {
  const clock = { now: T0 }
  const app = await build(t, clock)
  const limits: StackedRateLimiter = app.rates.use('api', [PER_SECOND, PER_DAY])
  t.equal(limits.name, 'api')
  t.strictSame(limits.policies, [{ ...PER_SECOND, burst: 10 }, PER_DAY], 'normalized, in the order given')
  t.ok(Object.isFrozen(limits.policies) && limits.policies.every((p) => Object.isFrozen(p)))

  t.strictSame(await limits.consume('u', { cost: 10 }), {
    allowed: true, denied: false, remaining: 0, resetAt: DAY_END,
    policies: [outcome(true, 0, 0, T0 + 1000, T0 + 100), outcome(true, 15, 0, DAY_END, DAY_END)]
  }, 'both consume: the next token in 100 ms; the day\'s units back at its end')
  t.strictSame(await limits.consume('u'), {
    allowed: false, denied: true, remaining: 0, retryAfterMs: 100, resetAt: DAY_END,
    policies: [outcome(false, 0, 100, T0 + 1000, T0 + 100), outcome(true, 15, 0, DAY_END, DAY_END)]
  }, 'the second refuses; the day keeps its 15 (more by its full capacity, as it stands)')
  clock.now = T0 + 1000
  t.match(await limits.consume('u', { cost: 10 }), { allowed: true, remaining: 0, policies: [{ remaining: 0 }, { remaining: 5 }] })
  clock.now = T0 + 2000
  const refused = await limits.consume('u', { cost: 10 })
  t.strictSame(refused, {
    allowed: false, denied: true, remaining: 5, retryAfterMs: DAY_END - clock.now, resetAt: DAY_END,
    policies: [outcome(true, 10, 0, T0 + 2000, T0 + 2000), outcome(false, 5, DAY_END - clock.now, DAY_END, DAY_END)]
  }, 'the day refuses; the second, full again, loses nothing')
  t.strictSame(await limits.check('u', { cost: 5 }), {
    allowed: true, denied: false, remaining: 5, resetAt: DAY_END,
    policies: [outcome(true, 10, 0, T0 + 2000, T0 + 2000), outcome(true, 5, 0, DAY_END, DAY_END)]
  }, 'check: it would pass, and nothing is consumed')
  t.strictSame(await limits.check('u', { cost: 10 }), refused, 'check: the refusal consume would give')
  t.match(await limits.consume('u', { cost: 5 }), { allowed: true, remaining: 0, policies: [{ remaining: 5 }, { remaining: 0 }] })
  t.match(await limits.check('u'), { denied: true, retryAfterMs: DAY_END - clock.now })
  t.match(await limits.consume('v'), { allowed: true, policies: [{ remaining: 9 }, { remaining: 24 }] }, 'another identity, its own quota')
})

t.test('handles and the address: the same name and list give the same handle and quota', async (t) => {
  const clock = { now: T0 }
  const backend = memoryBackend({ clock: () => clock.now })
  const app = await build(t, clock, { backend })
  const limits = app.rates.use('api', [PER_SECOND, PER_DAY])
  t.equal(app.rates.use('api', [PER_SECOND, PER_DAY]), limits)
  t.equal(app.rates.use('api', [{ ...PER_SECOND, burst: 10 }, { ...PER_DAY }]), limits, 'an equal, normalized list')
  let child!: StackedRateLimiter
  await app.register(async function messaging (c) { child = c.rates.use('api', [PER_SECOND, PER_DAY]) })
  await app.ready()
  t.not(child, limits, 'another plugin, another handle')

  await limits.consume('u', { cost: 3 })
  await child.consume('u', { cost: 1 })
  // The quota lives at the backend's stack, addressed as single limiters are: `<scope>#<name>`.
  t.strictSame(await backend.stack('app#api', limits.policies).state('su'), [{ tokens: 7000, last: T0 }, { start: DAY_END - DAY, count: 3 }])
  t.strictSame(await backend.stack('app/messaging#api', limits.policies).state('su'), [{ tokens: 9000, last: T0 }, { start: DAY_END - DAY, count: 1 }],
    "a sibling plugin's stack of the same name is its own quota")
  const shared = app.rates.global.use('api', [PER_SECOND, PER_DAY])
  t.match(await shared.consume('u'), { allowed: true, policies: [{ remaining: 9 }, { remaining: 24 }] }, 'the global scope too')
  t.equal(app.admission.stats().identities, 6, 'three stacks of two policies, one identity each')
})

t.test('the list: 1 to 8 different policies, each checked under policies[i]', async (t) => {
  const clock = { now: T0 }
  const app = await build(t, clock)
  const eight = Array.from({ length: MAX_STACK_POLICIES }, (_, i): RatePolicy => ({ algorithm: 'fixed-window', limit: 100, windowMs: 1000 * (i + 1) }))
  t.equal(MAX_STACK_POLICIES, 8)
  t.equal(app.rates.use('eight', eight).policies.length, 8)
  t.equal(app.rates.use('one', [PER_DAY]).policies.length, 1, 'one policy is a stack too')

  const accessor = Object.defineProperty([PER_SECOND], 0, { get: () => PER_DAY, enumerable: true })
  const bad: Array<[unknown, string, RegExp]> = [
    [[], 'policies', /a list of 1 to 8 policies, got an empty list/],
    [[...eight, PER_SECOND], 'policies', /at most 8 entries/],
    [[PER_SECOND, , PER_DAY], 'policies', /no holes, no other keys/], // eslint-disable-line no-sparse-arrays
    [Object.assign([PER_SECOND], { note: 1 }), 'policies', /no holes, no other keys/],
    [new Proxy([PER_SECOND], {}), 'policies', /a list of 1 to 8 policies/],
    [accessor, 'policies[0]', /an accessor property/],
    [[PER_SECOND, { ...PER_DAY, limit: 0 }], 'policies[1].limit', /positive safe integer/],
    [[PER_SECOND, { algorithm: 'leaky' }], 'policies[1].algorithm', /one of/],
    [[PER_SECOND, null], 'policies[1]', /a plain object/],
    [[PER_SECOND, PER_DAY, { ...PER_SECOND, burst: 10 }], 'policies[2]', /a policy unlike policies\[0\] \(a stack holds each policy once\)/],
    [[PER_DAY, { ...PER_DAY }], 'policies[1]', /unlike policies\[0\]/]
  ]
  for (const [policies, path, message] of bad) {
    const error = thrown(() => app.rates.use('bad', policies as never))
    t.type(error, RatesInvalidArgumentError, path)
    t.match(error, { code: 'RATES_INVALID_ARGUMENT', message })
    t.equal((error as RatesInvalidArgumentError).path, path)
  }
  t.equal(accessor.length, 1, 'the getter was never invoked')
  t.match(thrown(() => app.rates.use('bad', { length: 1, 0: PER_DAY } as never)), { path: 'policy["0"]', message: /^Expected `policy` to be a plain object/ }, 'not an array: a policy, checked as one')
  t.equal(app.rates.use('bad', [PER_DAY]).policies[0]!.limit, 25, 'the refused lists registered nothing')
})

t.test('cost: up to the smallest capacity; options and identities as for single limiters; every failure a rejection', async (t) => {
  const clock = { now: T0 }
  const app = await build(t, clock)
  const limits = app.rates.use('capacity', [{ algorithm: 'gcra', limit: 10, windowMs: 1000, burst: 4 }, PER_DAY])
  for (const call of ['consume', 'check'] as const) {
    const over = await rejection(t, () => limits[call]('u', { cost: 5 }))
    t.type(over, RatesInvalidArgumentError, `${call}: above the smallest capacity`)
    t.match(over, { path: 'cost', value: 5, message: /at most the smallest capacity of the limiter's policies \(4\)/ })
    t.match(await rejection(t, () => limits[call]('u', { cost: 0 })), { path: 'cost' })
    t.match(await rejection(t, () => limits[call]('u', { cost: 1, extra: true } as never)), { path: 'options.extra' })
    t.match(await rejection(t, () => limits[call]('u', null as never)), { path: 'options' })
    t.match(await rejection(t, () => limits[call](undefined as never)), { path: 'identity' })
  }
  t.match(await limits.consume('u', { cost: 4 }), { allowed: true, policies: [{ remaining: 0 }, { remaining: 21 }] }, 'the smallest capacity passes; nothing was taken before')
  t.match(await limits.check(['u', 1]), { allowed: true }, 'a tuple identity')
})

t.test('the same name as a single policy and as a list, or as another list: RatesPolicyConflictError', async (t) => {
  const clock = { now: T0 }
  const app = await build(t, clock)
  const single = app.rates.use('single', PER_SECOND)
  const stacked = app.rates.use('stacked', [PER_SECOND, PER_DAY])
  const cases: Array<[string, () => unknown, unknown, unknown]> = [
    ['a list where a policy is', () => app.rates.use('single', [PER_SECOND]), single.policy, [single.policy]],
    ['a policy where a list is', () => app.rates.use('stacked', PER_SECOND), stacked.policies, single.policy],
    ['another order', () => app.rates.use('stacked', [PER_DAY, PER_SECOND]), stacked.policies, [PER_DAY, single.policy]],
    ['fewer policies', () => app.rates.use('stacked', [PER_SECOND]), stacked.policies, [single.policy]],
    ['another policy', () => app.rates.use('stacked', [PER_SECOND, { ...PER_DAY, limit: 26 }]), stacked.policies, [single.policy, { ...PER_DAY, limit: 26 }]]
  ]
  for (const [why, use, existing, requested] of cases) {
    const error = thrown(use)
    t.type(error, RatesPolicyConflictError, why)
    t.match(error, { code: 'RATES_POLICY_CONFLICT', limiterName: why.startsWith('a list') ? 'single' : 'stacked' })
    t.strictSame((error as RatesPolicyConflictError).existing, existing, `${why}: existing`)
    t.strictSame((error as RatesPolicyConflictError).requested, requested, `${why}: requested`)
  }
  t.equal(app.rates.use('single', PER_SECOND), single, 'conflicts changed nothing')
  t.equal(app.rates.use('stacked', [PER_SECOND, PER_DAY]), stacked)
})

t.test('global conflicts between plugins are found by the backend and name the limiter', async (t) => {
  const clock = { now: T0 }
  const app = await build(t, clock)
  const errors: unknown[] = []
  await app.register(async function a (child) { child.rates.global.use('egress', [PER_SECOND, PER_DAY]) })
  await app.register(async function b (child) {
    errors.push(thrown(() => child.rates.global.use('egress', [PER_SECOND])))
    errors.push(thrown(() => child.rates.global.use('egress', PER_SECOND)))
  })
  await app.register(async function c (child) {
    child.rates.global.use('single-egress', PER_DAY)
    errors.push(thrown(() => child.rates.global.use('single-egress', [PER_DAY])))
  })
  await app.register(async function d (child) { errors.push(thrown(() => child.rates.global.use('single-egress', [PER_DAY]))) })
  await app.ready()
  const [shorter, single, inSameCaller, fromSibling] = errors
  t.match(shorter, { code: 'RATES_POLICY_CONFLICT', limiterName: 'egress', requested: [{ limit: 10 }] }, 'another list')
  t.equal(((shorter as RatesPolicyConflictError).existing as readonly unknown[]).length, 2)
  t.match(single, { code: 'RATES_POLICY_CONFLICT', limiterName: 'egress', requested: { limit: 10 } }, 'a single policy where another caller stacked')
  t.match(inSameCaller, { code: 'RATES_POLICY_CONFLICT', limiterName: 'single-egress', existing: { limit: 25 } }, 'found by the handle')
  t.match(fromSibling, { code: 'RATES_POLICY_CONFLICT', limiterName: 'single-egress', existing: { limit: 25 }, requested: [{ limit: 25 }] }, 'found by the backend')
  t.match((fromSibling as Error).message, /^Rate limiter "single-egress" already has the policy \{/)
})

t.test('a backend without stacks: use() with a list throws RatesInvalidArgumentError naming its kind', async (t) => {
  const limiter: BackendLimiter = {
    policy: { algorithm: 'fixed-window', limit: 1, windowMs: 1000 },
    consume: async () => ({ allowed: true, denied: false, remaining: 0, resetAt: 0 }),
    state: async () => undefined,
    delete: async () => false
  }
  const custom: RatesBackend = { kind: 'custom-kv', limiter: () => limiter, stop: async () => {} }
  const app = await build(t, { now: T0 }, { backend: custom })
  const error = thrown(() => app.rates.use('api', [PER_SECOND, PER_DAY]))
  t.type(error, RatesInvalidArgumentError)
  t.match(error, { code: 'RATES_INVALID_ARGUMENT' })
  t.equal((error as RatesInvalidArgumentError).path, 'policies')
  t.match((error as Error).message, /^Expected `policies` to be a single policy: the "custom-kv" backend has no stacks \(RatesBackend\.stack\), got \[/)
  t.equal((await app.rates.use('one', PER_DAY).consume('u')).allowed, true, 'single policies still work')
  t.type(thrown(() => app.rates.use('one', [PER_DAY])), RatesPolicyConflictError, 'a name taken by a single policy: the conflict is named first')
})

t.test('saturation and stop', async (t) => {
  const clock = { now: T0 }
  const app = Fastify()
  const backend: MemoryBackend = memoryBackend({ maxIdentities: 1, clock: () => clock.now })
  await app.register(admission, { backend, rateLimit: false })
  const limits = app.rates.use('api', [PER_SECOND, PER_DAY])
  t.equal((await limits.consume('a')).allowed, true)
  const full = await rejection(t, () => limits.consume('b'))
  t.type(full, RatesUnavailableError, 'a new identity beyond the bound')
  t.match(full, { code: 'RATES_UNAVAILABLE', retryAfterMs: DAY_END - T0 })
  t.type(await rejection(t, () => limits.check('b')), RatesUnavailableError, 'check: it cannot decide either')

  await app.close()
  for (const call of ['consume', 'check'] as const) {
    const error = await rejection(t, () => limits[call]('a'))
    t.type(error, RatesStoppedError, call)
    t.match(error, { code: 'RATES_STOPPED', limiterName: 'api' })
  }
  t.match(thrown(() => app.rates.use('api', [PER_SECOND, PER_DAY])), { code: 'RATES_STOPPED', limiterName: 'api' })
  t.match(thrown(() => app.rates.use('other', [])), { code: 'RATES_STOPPED' }, 'stopped comes first, even for a bad list')
})
