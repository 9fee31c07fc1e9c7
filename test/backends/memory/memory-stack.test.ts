// The memory backend's stacks: several policies on one quota, decided as one — all consume or
// none does. Exact scenarios for each rule, then a model-based property: a stack decides as its
// policies' single limiters would, each fed only the consumes that every policy allowed.
import t from 'tap'
import fc from 'fast-check'
import { MemoryBackend, memoryBackend } from '../../../lib/backends/memory/memory-backend.js'
import { MemoryBackendStack } from '../../../lib/backends/memory/memory-stack.js'
import { MemoryLimiter, ADMITTED } from '../../../lib/backends/memory/memory-limiter.js'
import { LIMITED, UNDECIDABLE } from '../../../lib/rates/backend.js'
import { kernelOf, type Algorithm, type Policy } from '../../../lib/core/rates/index.js'
import type { PolicyOutcome, StackDecision } from '../../../lib/rates/decision.js'
import { RatesPolicyConflictError, RatesStoppedError, RatesUnavailableError } from '../../../lib/rates/errors.js'
import { capacityOf, normalizePolicy } from '../../../lib/rates/policy.js'
import { rejection, thrown } from '../../helpers/errors.js'

/** A multiple of 10 000: windows of 1, 5 and 10 s start on it. */
const T0 = 1_700_000_000_000
const ALGORITHMS: readonly Algorithm[] = ['token-bucket', 'fixed-window', 'sliding-window-counter', 'gcra']
const hasBurst = (algorithm: Algorithm): boolean => algorithm === 'token-bucket' || algorithm === 'gcra'

interface Clock { now: number }

function backendAt (clock: Clock, maxIdentities = 1000): MemoryBackend {
  return memoryBackend({ maxIdentities, clock: () => clock.now })
}

const policy = (algorithm: Algorithm, limit: number, windowMs: number, burst?: number): Policy =>
  normalizePolicy(burst === undefined ? { algorithm, limit, windowMs } : { algorithm, limit, windowMs, burst })

const outcome = (allowed: boolean, remaining: number, retryAfterMs: number, resetAt: number, moreAt: number): PolicyOutcome =>
  ({ allowed, remaining, retryAfterMs, resetAt, moreAt })

/** What a promise settles with: the decision, or the error it rejects with. */
async function settle (promise: Promise<StackDecision>): Promise<StackDecision | Error> {
  try {
    return await promise
  } catch (error) {
    return error as Error
  }
}

t.test('all or nothing, for every algorithm: a refusal leaves every policy\'s state exactly as it was', async (t) => {
  // tight refuses the third cost-1 request in the same millisecond; roomy has room for 50.
  const waits: Record<Algorithm, number> = { 'token-bucket': 500, 'fixed-window': 1000, 'sliding-window-counter': 1500, gcra: 500 }
  for (const refusing of ALGORITHMS) {
    for (const other of ALGORITHMS) {
      for (const tightFirst of [true, false]) {
        const clock = { now: T0 }
        const backend = backendAt(clock)
        const tight = policy(refusing, 2, 1000)
        const roomy = policy(other, 50, 10_000)
        const stack = backend.stack('s', tightFirst ? [tight, roomy] : [roomy, tight])
        const [ti, ri] = tightFirst ? [0, 1] : [1, 0]
        const at = `${refusing} refuses, ${other} has room, ${tightFirst ? 'tight first' : 'roomy first'}`
        t.equal((await stack.consume('u', 1)).allowed, true)
        const second = await stack.consume('u', 1)
        t.equal(second.allowed, true)
        const before = await stack.state('u')
        const identities = backend.identities
        const denied = await stack.consume('u', 1)
        t.strictSame(await stack.state('u'), before, `${at}: no policy's state changed`)
        t.equal(backend.identities, identities)
        t.match(denied, { allowed: false, denied: true, remaining: 0, retryAfterMs: waits[refusing] }, at)
        // A refused cost of 1 with nothing left: the first unit beyond none comes with the wait.
        t.strictSame(denied.policies[ti], outcome(false, 0, waits[refusing], denied.policies[ti]!.resetAt, T0 + waits[refusing]), `${at}: the refusing policy, its next unit when the wait ends`)
        // Nothing stored: its next unit is not known from the trial, its full capacity stands for it.
        t.strictSame(denied.policies[ri], outcome(true, 48, 0, second.policies[ri]!.resetAt, second.policies[ri]!.resetAt), `${at}: the other, as it stands — 2 of 50 taken, not 3; more by its full capacity`)
        // The wait is exact: nothing was taken meanwhile, by the refusal either.
        clock.now = T0 + waits[refusing] - 1
        t.equal((await stack.consume('u', 1)).allowed, false, `${at}: one millisecond early`)
        clock.now = T0 + waits[refusing]
        const after = await stack.consume('u', 1)
        t.equal(after.allowed, true, `${at}: on time`)
        // The other policy paid for these three admissions and no more: as its own limiter, fed them.
        const alone = backend.limiter('alone', roomy)
        for (const now of [T0, T0, T0 + waits[refusing]]) {
          clock.now = now
          await alone.consume('u', 1)
        }
        t.equal(after.policies[ri]!.remaining, alone.synchronous!.remaining, `${at}: the other policy paid for 3 admissions, no more`)
        t.equal(after.policies[ri]!.resetAt, alone.synchronous!.resetAt)
        t.equal(after.policies[ri]!.moreAt, alone.synchronous!.moreAt, `${at}: an admission's next unit, exact`)
      }
    }
  }
})

t.test('the wait is the largest among the policies that refused; after it every one has room', async (t) => {
  const clock = { now: T0 }
  const backend = backendAt(clock)
  const stack = backend.stack('s', [policy('fixed-window', 1, 1000), policy('gcra', 1, 3000), policy('token-bucket', 100, 1000)])
  t.equal((await stack.consume('u', 1)).allowed, true)
  t.strictSame(await stack.consume('u', 1), {
    allowed: false,
    denied: true,
    remaining: 0,
    retryAfterMs: 3000,
    resetAt: T0 + 3000,
    policies: [outcome(false, 0, 1000, T0 + 1000, T0 + 1000), outcome(false, 0, 3000, T0 + 3000, T0 + 3000), outcome(true, 99, 0, T0 + 10, T0 + 10)]
  })
  clock.now = T0 + 1000
  const one = await stack.consume('u', 1)
  t.match(one, { denied: true, retryAfterMs: 2000 }, 'the fixed window has room again, gcra does not')
  t.strictSame(one.policies.map((p) => p.allowed), [true, false, true])
  t.strictSame(one.policies[0], outcome(true, 1, 0, T0 + 1000, T0 + 1000), 'its room untouched by the refusal')
  clock.now = T0 + 2999
  t.match(await stack.consume('u', 1), { denied: true, retryAfterMs: 1 })
  clock.now = T0 + 3000
  t.match(await stack.consume('u', 1), { allowed: true, remaining: 0 })
})

t.test('per policy: after an admission the numbers after it; after a refusal or a check, the state as it stands', async (t) => {
  const clock = { now: T0 + 250 }
  const backend = backendAt(clock)
  const bucket = policy('token-bucket', 10, 1000)
  const window = policy('fixed-window', 5, 1000)
  const stack = backend.stack('s', [bucket, window])
  const admitted = await stack.consume('u', 2)
  t.strictSame(admitted, {
    allowed: true, denied: false, remaining: 3, resetAt: T0 + 1000,
    policies: [outcome(true, 8, 0, T0 + 450, T0 + 350), outcome(true, 3, 0, T0 + 1000, T0 + 1000)]
  }, 'remaining is the least, resetAt the latest; the bucket\'s next token in 100 ms, the window\'s at its end')
  t.strictSame(Object.keys(admitted), ['allowed', 'denied', 'remaining', 'resetAt', 'policies'])

  // The same numbers as each policy's own limiter gives after the same consume.
  const singles = [backend.limiter('single-bucket', bucket), backend.limiter('single-window', window)]
  for (const [i, single] of singles.entries()) {
    const d = await single.consume('u', 2)
    t.strictSame([d.remaining, d.resetAt, d.moreAt], [admitted.policies[i]!.remaining, admitted.policies[i]!.resetAt, admitted.policies[i]!.moreAt], `policy ${i}: as its single limiter`)
  }

  const refused = await stack.consume('u', 4)
  t.strictSame(refused, {
    allowed: false, denied: true, remaining: 3, retryAfterMs: 750, resetAt: T0 + 1000,
    policies: [outcome(true, 8, 0, T0 + 450, T0 + 450), outcome(false, 3, 750, T0 + 1000, T0 + 1000)]
  }, 'the bucket had room for 4 (4 would have remained): as it stands, 4 + 4, more by its full capacity; the window refused: more at its end')
  t.strictSame(Object.keys(refused), ['allowed', 'denied', 'remaining', 'retryAfterMs', 'resetAt', 'policies'])

  const before = await stack.state('u')
  t.strictSame(await stack.check('u', 2), {
    allowed: true, denied: false, remaining: 3, resetAt: T0 + 1000,
    policies: [outcome(true, 8, 0, T0 + 450, T0 + 450), outcome(true, 3, 0, T0 + 1000, T0 + 1000)]
  }, 'a check that would pass: nothing consumed, so nothing subtracted; more by full capacity')
  t.strictSame(await stack.check('u', 4), refused, 'a check that would not: what the refusal said')
  t.strictSame(await stack.state('u'), before, 'checks store nothing')
  t.strictSame(await stack.consume('u', 3), {
    allowed: true, denied: false, remaining: 0, resetAt: T0 + 1000,
    policies: [outcome(true, 5, 0, T0 + 750, T0 + 350), outcome(true, 0, 0, T0 + 1000, T0 + 1000)]
  }, 'the check was right, and took nothing')

  // Decision objects are plain and distinct.
  const a = await stack.check('u', 1)
  const b = await stack.check('u', 1)
  t.not(a, b)
  t.not(a.policies, b.policies)
  t.equal(Object.getPrototypeOf(a), Object.prototype)
})

t.test('check and checkNow store nothing: no state changes, no slot kept for a new identity', async (t) => {
  const clock = { now: T0 + 250 }
  const backend = backendAt(clock)
  const stack = backend.stack('s', [policy('sliding-window-counter', 5, 1000), policy('gcra', 5, 1000)])
  t.strictSame(await stack.check('new', 2), {
    allowed: true, denied: false, remaining: 5, resetAt: T0 + 250,
    policies: [outcome(true, 5, 0, T0 + 250, T0 + 250), outcome(true, 5, 0, T0 + 250, T0 + 250)]
  }, 'a new identity stands at full capacity, full now (not at its window\'s start)')
  t.equal(backend.identities, 0, 'no slot kept')
  t.strictSame(stack.stores.map((s) => s.table.size), [0, 0])
  t.strictSame(await stack.state('new'), [undefined, undefined])

  t.equal(stack.checkNow('new', 5), ADMITTED, 'the synchronous check')
  t.equal(stack.decidedAt, T0 + 250)
  t.strictSame([...stack.remaining], [5, 5])
  t.strictSame([...stack.resetAt], [T0 + 250, T0 + 250])
  t.strictSame([...stack.moreAt], [T0 + 250, T0 + 250])
  t.equal(stack.retryAfterMs, 0)
  t.equal(stack.checkNow('new', 6), LIMITED, 'a cost above the capacity')
  t.equal(backend.identities, 0, 'still no slot, refused or not')

  await stack.consume('known', 5)
  const before = await stack.state('known')
  const identities = backend.identities
  t.match(await stack.check('known', 1), { denied: true })
  t.equal(stack.checkNow('known', 1), LIMITED)
  clock.now += 1000
  t.match(await stack.check('known', 1), { allowed: true })
  t.equal(stack.checkNow('known', 1), ADMITTED)
  t.strictSame(await stack.state('known'), before, 'refused or not, a check stores nothing')
  t.equal(backend.identities, identities)
})

t.test('saturation: a full table makes the stack UNDECIDABLE with the table\'s wait, and keeps no slot anywhere', async (t) => {
  for (const windowFirst of [true, false]) {
    const clock = { now: T0 }
    const backend = backendAt(clock, 1)
    const window = policy('fixed-window', 5, 1000) // a recovers at T0 + 1000
    const bucket = policy('token-bucket', 5, 1000) // a recovers at T0 + 200
    const stack = backend.stack('s', windowFirst ? [window, bucket] : [bucket, window])
    const [wi, bi] = windowFirst ? [0, 1] : [1, 0]
    t.equal((await stack.consume('a', 1)).allowed, true)

    const full = await rejection(t, () => stack.consume('b', 1))
    t.type(full, RatesUnavailableError, 'both tables full')
    t.match(full, { code: 'RATES_UNAVAILABLE', retryAfterMs: 1000 }, 'the largest of the full tables\' waits')
    t.match((full as Error).message, 'tracks 1 identities for each policy of this stack')
    t.equal(stack.decide('b', 1), UNDECIDABLE, 'the synchronous decision')
    t.equal(stack.retryAfterMs, 1000)
    t.match(await rejection(t, () => stack.check('b', 1)), { code: 'RATES_UNAVAILABLE', retryAfterMs: 1000 }, 'a check says what a consume would: it cannot decide')
    t.equal(stack.checkNow('b', 1), UNDECIDABLE)
    t.equal(backend.identities, 2, 'a in each table, b in none')

    // The bucket's state for a has recovered: its table drops it and gives b a slot for the trial —
    // and takes it back, since the window's table is still full.
    clock.now = T0 + 300
    t.match(await rejection(t, () => stack.consume('b', 1)), { code: 'RATES_UNAVAILABLE', retryAfterMs: 700 })
    t.equal(stack.stores[bi]!.table.find('b'), -1, 'no slot kept in the table that had room')
    t.equal(stack.stores[bi]!.table.size, 0, 'a recovered state dropped, nothing else')
    t.equal(stack.stores[wi]!.table.find('b'), -1)
    t.strictSame(await stack.state('a'), windowFirst ? [{ start: T0, count: 1 }, undefined] : [undefined, { start: T0, count: 1 }])

    clock.now = T0 + 1000
    t.match(await stack.consume('b', 1), { allowed: true, remaining: 4 }, 'once a recovered, b is tracked')
  }
})

t.test('saturation: a refusal by another policy outranks it, and the full policy reports a new identity\'s room', async (t) => {
  // Two slots. The bucket (1 token a second, burst 2) still refuses a, while the window's table holds
  // two other live identities and no slot for a: the refusal is certain, so it is the decision.
  for (const bucketFirst of [true, false]) {
    const clock = { now: T0 - 1 }
    const backend = backendAt(clock, 2)
    const bucket = policy('token-bucket', 1, 1000, 2)
    const window = policy('fixed-window', 2, 10_000)
    const stack = backend.stack('s', bucketFirst ? [bucket, window] : [window, bucket])
    const [bi, wi] = bucketFirst ? [0, 1] : [1, 0]
    t.equal((await stack.consume('a', 2)).allowed, true) // bucket: full at T0 + 1999; window: recovered at T0
    clock.now = T0
    t.equal((await stack.consume('o1', 1)).allowed, true) // bucket: full at T0 + 1000; window: at T0 + 10 000
    clock.now = T0 + 1000
    t.equal((await stack.consume('o2', 1)).allowed, true) // the bucket's table drops o1, the window's a
    t.strictSame(await stack.state('a'), bucketFirst ? [{ tokens: 0, last: T0 - 1 }, undefined] : [undefined, { tokens: 0, last: T0 - 1 }])

    const identities = backend.identities
    const denied = await stack.consume('a', 2)
    const policies: PolicyOutcome[] = []
    policies[bi] = outcome(false, 1, 999, T0 + 1999, T0 + 1999) // 1.001 tokens: the second whole one in 999 ms
    policies[wi] = outcome(true, 2, 0, T0 + 1000, T0 + 1000)
    t.strictSame(denied, { allowed: false, denied: true, remaining: 1, retryAfterMs: 999, resetAt: T0 + 1999, policies },
      'the bucket\'s refusal; the window, with no state for a, at full capacity — not the full table\'s wait')
    t.equal(stack.decide('a', 2), LIMITED, 'the synchronous decision')
    t.equal(stack.retryAfterMs, 999)
    t.strictSame([...stack.remaining], policies.map((p) => p.remaining))
    t.strictSame([...stack.resetAt], policies.map((p) => p.resetAt))
    t.strictSame([...stack.moreAt], policies.map((p) => p.moreAt))
    t.equal(backend.identities, identities, 'nothing stored')
    t.equal(stack.stores[wi]!.table.find('a'), -1)
  }
})

t.test('state, delete, identities', async (t) => {
  const clock = { now: T0 }
  const backend = backendAt(clock)
  const policies = [policy('token-bucket', 10, 1000), policy('fixed-window', 5, 1000)]
  const stack = backend.stack('s', policies)
  t.type(stack, MemoryBackendStack)
  t.equal(stack.policies, policies, 'the policies given')
  t.equal(stack.synchronous, stack, 'it decides synchronously itself')
  t.strictSame(await stack.state('u'), [undefined, undefined], 'a new identity has no state')
  t.equal(await stack.delete('u'), false)

  await stack.consume('u', 2)
  await stack.consume('10.0.0.1', 1)
  t.strictSame(await stack.state('u'), [{ tokens: 8000, last: T0 }, { start: T0, count: 2 }], "each policy's kernel state, in order")
  t.equal(stack.identities, 4, 'two identities under each of two policies')
  backend.limiter('single', policies[0]!)
  await backend.limiter('single', policies[0]!).consume('u', 1)
  t.equal(backend.identities, 5, 'the backend counts stacks and limiters')

  t.equal(await stack.delete('u'), true)
  t.strictSame(await stack.state('u'), [undefined, undefined])
  t.equal(await stack.delete('u'), false)
  t.equal(stack.identities, 2)
  t.match(await stack.consume('u', 1), { allowed: true, policies: [{ remaining: 9 }, { remaining: 4 }] }, 'forgotten: a new identity')

  // A state only one policy still holds (the other's recovered and was dropped) is forgotten too.
  const small = backendAt(clock, 1).stack('t', [policy('token-bucket', 1000, 1000), policy('fixed-window', 5, 10_000)])
  await small.consume('a', 1) // the bucket's state recovers within a millisecond
  clock.now = T0 + 5
  await settle(small.consume('b', 1)) // the bucket's table drops a; the window's is full
  t.strictSame((await small.state('a')).map((s) => s === undefined), [true, false])
  t.equal(await small.delete('a'), true)
  t.equal(small.identities, 0)
})

t.test('after stop: every call rejects with RatesStoppedError, opening one throws', async (t) => {
  const clock = { now: T0 }
  const backend = backendAt(clock)
  const stack = backend.stack('app#s', [policy('gcra', 5, 1000)])
  await stack.consume('u', 1)
  await backend.stop()
  for (const [name, call] of [
    ['consume', () => stack.consume('u', 1)],
    ['check', () => stack.check('u', 1)],
    ['state', () => stack.state('u')],
    ['delete', () => stack.delete('u')]
  ] as const) {
    const error = await rejection(t, call)
    t.type(error, RatesStoppedError, name)
    t.match(error, { code: 'RATES_STOPPED', limiterName: 'app#s' })
  }
  t.type(thrown(() => backend.stack('app#s', [policy('gcra', 5, 1000)])), RatesStoppedError)
  t.type(thrown(() => backend.stack('app#other', [policy('gcra', 5, 1000)])), RatesStoppedError)
  t.equal(backend.identities, 0, 'its stacks are gone')
})

t.test('an address keeps its list of policies: another list, or a single policy, is a conflict', async (t) => {
  const backend = backendAt({ now: T0 })
  const a = policy('token-bucket', 10, 1000)
  const b = policy('fixed-window', 1000, 86_400_000)
  const stack = backend.stack('app#s', [a, b])
  t.equal(backend.stack('app#s', [a, b]), stack, 'the same list: the same stack')
  t.equal(backend.stack('app#s', [policy('token-bucket', 10, 1000, 10), { ...b }]), stack, 'an equal list')
  for (const [other, why] of [
    [[b, a], 'the same policies in another order'],
    [[a], 'fewer'],
    [[a, b, policy('gcra', 1, 1000)], 'more'],
    [[a, policy('fixed-window', 1001, 86_400_000)], 'one policy changed']
  ] as const) {
    const error = thrown(() => backend.stack('app#s', other))
    t.type(error, RatesPolicyConflictError, why)
    t.match(error, { code: 'RATES_POLICY_CONFLICT', limiterName: 'app#s' })
    t.equal((error as RatesPolicyConflictError).existing, stack.policies)
    t.equal((error as RatesPolicyConflictError).requested, other)
  }
  t.match((thrown(() => backend.stack('app#s', [a])) as Error).message,
    /^Rate limiter "app#s" already has the policy \[ \{ algorithm: 'token-bucket'.*\}, \{ algorithm: 'fixed-window'.* \], got \[ \{ algorithm: 'token-bucket'/)

  // One address, one quota: a single limiter and a stack never sit side by side there.
  const single = thrown(() => backend.limiter('app#s', a))
  t.type(single, RatesPolicyConflictError, 'a limiter where a stack is')
  t.match(single, { limiterName: 'app#s', existing: [a, b], requested: a })
  backend.limiter('app#l', a)
  const stacked = thrown(() => backend.stack('app#l', [a]))
  t.type(stacked, RatesPolicyConflictError, 'a stack where a limiter is, even of that one policy')
  t.match(stacked, { limiterName: 'app#l', existing: a, requested: [a] })
  t.equal(backend.stack('app#s', [a, b]), stack, 'conflicts changed nothing')
})

// =============================================================================================
// The model: each policy's single-policy MemoryLimiter, fed only the consumes the whole stack
// admitted (replayed per identity: identities never share state).

type Op = { kind: 'consume' | 'check', key: number, dt: number, share: number }

const stackPolicyArb: fc.Arbitrary<Policy> = fc.record({
  algorithm: fc.constantFrom(...ALGORITHMS),
  limit: fc.integer({ min: 1, max: 6 }),
  windowMs: fc.oneof(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: 500 })),
  burst: fc.integer({ min: 1, max: 6 })
}).map(({ algorithm, limit, windowMs, burst }) => policy(algorithm, limit, windowMs, hasBurst(algorithm) ? burst : undefined))

const opArb: fc.Arbitrary<Op> = fc.record({
  kind: fc.constantFrom('consume' as const, 'consume' as const, 'check' as const),
  key: fc.integer({ min: 0, max: 2 }),
  // Steps of nothing (several decisions in one millisecond), short and long ones, and back.
  dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 30 }), fc.integer({ min: -15, max: 0 }), fc.integer({ min: 0, max: 2000 })),
  share: fc.double({ min: 0, max: 1, noNaN: true })
})

const KEYS = ['a', '10.0.0.1', 'b']

/** A policy's single limiter after `history`, then deciding (key, now, cost): its fields. */
function single (p: Policy, history: ReadonlyArray<readonly [number, number]>, key: string, now: number, cost: number): { verdict: number, remaining: number, retryAfterMs: number, resetAt: number, moreAt: number, state: unknown } {
  const limiter = new MemoryLimiter(kernelOf(p.algorithm), p, 1)
  for (const [at, c] of history) {
    if (limiter.consume(key, at, c) !== ADMITTED) throw new Error('a committed consume was refused on replay')
  }
  const state = limiter.peek(key)
  const verdict = limiter.consume(key, now, cost)
  return { verdict, remaining: limiter.remaining, retryAfterMs: limiter.retryAfterMs, resetAt: limiter.resetAt, moreAt: limiter.moreAt, state }
}

t.test('property: a stack decides as its policies\' single limiters, committing only when all allow', async (t) => {
  // (A refusal outranking a full table is too rare to draw: its own scenario above covers it.)
  const counts = { admitted: 0, refused: 0, checks: 0, someHadRoom: 0, undecidable: 0 }
  await fc.assert(fc.asyncProperty(
    fc.array(stackPolicyArb, { minLength: 1, maxLength: 4 }),
    fc.constantFrom(1, 2, 1000),
    fc.boolean(),
    fc.integer({ min: 0, max: 4_000_000_000_000 }),
    fc.array(opArb, { minLength: 1, maxLength: 40 }),
    async (policies, maxIdentities, backwards, start, ops) => {
      // A clock may step back only where no table is ever full: the memory backend drops a state
      // once it has recovered, which equals a new one only on a clock that never steps back.
      const stepsBack = backwards && maxIdentities === 1000
      const clock = { now: start }
      const backend = backendAt(clock, maxIdentities)
      const stack = backend.stack('s', policies)
      const smallest = Math.min(...policies.map(capacityOf))
      const committed = new Map<string, Array<readonly [number, number]>>(KEYS.map((k) => [k, []]))
      for (const [index, op] of ops.entries()) {
        clock.now = Math.max(0, clock.now + (stepsBack ? op.dt : Math.abs(op.dt)))
        const now = clock.now
        const key = KEYS[op.key]!
        const cost = Math.max(1, Math.min(smallest, Math.ceil(op.share * smallest)))
        const at = `op ${index} ${op.kind}(${key}, ${cost}) at ${now}`
        const history = committed.get(key)!
        const each = policies.map((p) => ({ decided: single(p, history, key, now, cost), standing: single(p, history, key, now, 0) }))
        const allAllow = each.every((e) => e.decided.verdict === ADMITTED)
        let stores = op.kind === 'consume' && allAllow
        const states = await Promise.all(KEYS.map((k) => stack.state(k)))
        const got = await settle(op.kind === 'consume' ? stack.consume(key, cost) : stack.check(key, cost))
        if (got instanceof Error) {
          // Only a full table: then no policy refused, and nothing changed.
          if (!(got instanceof RatesUnavailableError) || maxIdentities === 1000) throw got
          if (!allAllow) throw new Error(`${at}: unavailable, though a policy refuses (a refusal is certain)`)
          if (!Number.isSafeInteger(got.retryAfterMs) || got.retryAfterMs! < 1) throw new Error(`${at}: retryAfterMs ${got.retryAfterMs}`)
          stores = false
          counts.undecidable++
        } else {
          const outcomes = each.map(({ decided, standing }): PolicyOutcome => {
            const allowed = decided.verdict === ADMITTED
            if (stores) return outcome(true, decided.remaining, 0, decided.resetAt, decided.moreAt)
            // Nothing stored: the state as it stands; with room, remaining is the trial's plus the cost.
            if (allowed && standing.remaining !== decided.remaining + cost) throw new Error(`${at}: standing ${standing.remaining}, trial ${decided.remaining} + ${cost}`)
            if (!allowed && (standing.remaining !== decided.remaining || standing.resetAt !== decided.resetAt || standing.moreAt !== decided.moreAt)) throw new Error(`${at}: a refusal's numbers are not the standing ones`)
            // A policy with room reports its standing full capacity as its next unit (the trial does
            // not tell the standing state's: later, never early); one that refused, its own exact one.
            if (allowed && standing.resetAt < standing.moreAt) throw new Error(`${at}: full capacity at ${standing.resetAt}, before the next unit at ${standing.moreAt}`)
            return outcome(allowed, standing.remaining, allowed ? 0 : decided.retryAfterMs, standing.resetAt, allowed ? standing.resetAt : decided.moreAt)
          })
          const remaining = Math.min(...outcomes.map((o) => o.remaining))
          const resetAt = Math.max(...outcomes.map((o) => o.resetAt))
          const want: StackDecision = allAllow
            ? { allowed: true, denied: false, remaining, resetAt, policies: outcomes }
            : { allowed: false, denied: true, remaining, retryAfterMs: Math.max(...outcomes.filter((o) => !o.allowed).map((o) => o.retryAfterMs)), resetAt, policies: outcomes }
          if (JSON.stringify(got) !== JSON.stringify(want)) throw new Error(`${at}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`)
          if (op.kind === 'check') counts.checks++
          else if (allAllow) counts.admitted++
          else counts.refused++
          if (!allAllow && outcomes.some((o) => o.allowed)) counts.someHadRoom++
        }
        if (stores) {
          history.push([now, cost])
        } else {
          const after = await Promise.all(KEYS.map((k) => stack.state(k)))
          // Dropping a recovered state (a full table's sweep) is the only change allowed.
          for (const [k, before] of states.entries()) {
            for (const [i, s] of before.entries()) {
              if (JSON.stringify(after[k]![i]) !== JSON.stringify(s) && after[k]![i] !== undefined) throw new Error(`${at}: ${KEYS[k]}'s state under policy ${i} changed though nothing was stored`)
            }
          }
          if (stack.stores.some((s) => s.table.find(key) !== -1) && history.length === 0) throw new Error(`${at}: a slot kept for a new identity`)
        }
        if (maxIdentities === 1000) {
          // No table is ever full: every state is exactly its single limiter's.
          const want = policies.map((p) => single(p, history, key, now, 0).state)
          const state = await stack.state(key)
          if (JSON.stringify(state) !== JSON.stringify(want)) throw new Error(`${at}: state ${JSON.stringify(state)}, want ${JSON.stringify(want)}`)
        }
      }
    }), { numRuns: 400 })
  for (const [what, n] of Object.entries(counts)) t.ok(n > 40, `${what}: ${n}`)
})
