// Leases for hot keys (`redisBackend({ leases })`), without Redis: several backends (processes)
// share one simulated server that decides on the kernels (kernel-client.ts), on one test clock.
// Under fast-check, whatever the process count, the rate and the algorithm, the admissions stay
// within the bound docs/guides/hot-keys.md states, every refusal is one the quota gives at that
// moment, and a hot key costs far fewer calls than decisions.
import Fastify from 'fastify'
import t from 'tap'
import fc from 'fast-check'
import { admission } from '../../../lib/index.js'
import { kernelFor, type Algorithm, type Policy } from '../../../lib/core/rates/index.js'
import { testingRedisBackend, redisBackend, type RedisBackend, type RedisBackendLimiter, type RedisScriptClient } from '../../../lib/backends/redis/redis-backend.js'
import type { RateDecision } from '../../../lib/rates/decision.js'
import { normalizePolicy, policyFingerprint } from '../../../lib/rates/policy.js'
import { kernelServer, type KernelServer } from './kernel-client.js'

const T0 = 1_800_000_000_000

interface Admission { readonly at: number, readonly cost: number }

/** `processes` backends with leases on one simulated server and one clock. */
function fleet (processes: number, leases: { maxUnits: number, holdMs: number }, denyCache: boolean): { server: KernelServer, clock: { now: number }, backends: RedisBackend[] } {
  const server = kernelServer()
  const clock = { now: T0 }
  const backends = Array.from({ length: processes }, () =>
    testingRedisBackend({ client: server.client(), leases: { ...leases }, denyCache: denyCache ? {} : false, timeoutMs: 10_000 }, { now: () => clock.now }))
  return { server, clock, backends }
}

// Over any span of admissions, what the policy allows stretched by one hold (token bucket, GCRA).
function bucketBoundHolds (admissions: Admission[], policy: Policy, holdMs: number): string | undefined {
  const capacity = policy.burst ?? policy.limit
  for (let i = 0; i < admissions.length; i++) {
    let sum = 0
    for (let j = i; j < admissions.length; j++) {
      sum += admissions[j]!.cost
      const span = admissions[j]!.at - admissions[i]!.at
      if ((sum - capacity) * policy.windowMs > policy.limit * (span + holdMs)) return `${sum} units over ${span} ms`
    }
  }
  return undefined
}

// Every window at most its limit; for the sliding counter, its estimate at each admission too.
function windowBoundHolds (admissions: Admission[], policy: Policy): string | undefined {
  const W = policy.windowMs
  const per = new Map<number, number>()
  for (const { at, cost } of admissions) {
    const start = Math.floor(at / W) * W
    const current = (per.get(start) ?? 0) + cost
    per.set(start, current)
    if (current > policy.limit) return `${current} units in the window at ${start}`
    if (policy.algorithm === 'sliding-window-counter') {
      const previous = per.get(start - W) ?? 0
      if (previous * (W - (at - start)) + current * W > policy.limit * W) return `estimate over the limit at ${at}`
    }
  }
  return undefined
}

const algorithms: Algorithm[] = ['fixed-window', 'sliding-window-counter', 'token-bucket', 'gcra']

t.test('the lease bound holds for every algorithm, process count and rate; every refusal is the quota\'s', async (t) => {
  for (const algorithm of algorithms) {
    await fc.assert(fc.asyncProperty(
      fc.integer({ min: 4, max: 60 }),
      fc.constantFrom(1000, 2000),
      fc.integer({ min: 1, max: 6 }),
      fc.record({ maxUnits: fc.integer({ min: 1, max: 40 }), holdMs: fc.integer({ min: 1, max: 500 }) }),
      fc.boolean(),
      fc.array(fc.record({ advance: fc.integer({ min: 0, max: 300 }), process: fc.nat(), burst: fc.integer({ min: 1, max: 8 }), cost: fc.integer({ min: 1, max: 2 }) }), { minLength: 1, maxLength: 60 }),
      async (limit, windowMs, processes, leases, denyCache, steps) => {
        const policy = normalizePolicy({ algorithm, limit, windowMs })
        const { server, clock, backends } = fleet(processes, leases, denyCache)
        const limiters = backends.map((backend) => backend.limiter('app#hot', policy))
        const kernel = kernelFor(policy)
        const key = limiters[0]!.keyOf('k')
        const admissions: Admission[] = []
        for (const { advance, process, burst, cost } of steps) {
          clock.now += advance
          const limiter = limiters[process % processes]!
          const before = server.refusals
          const decisions: RateDecision[] = await Promise.all(Array.from({ length: burst }, async () => limiter.consume('k', cost)))
          let refused = 0
          for (const decision of decisions) {
            if (decision.allowed) {
              admissions.push({ at: clock.now, cost })
              continue
            }
            refused++
            if (decision.retryAfterMs < 1) throw new Error('a refusal without a wait')
            // Its wait is the quota's: after it, with nothing else consumed, the cost passes there
            // (a request alone: in a burst, others may be admitted after it; and not from the deny
            // cache, which answers from the state of the denial it remembers).
            const stored = server.state(key) ?? kernel.fresh(policy, clock.now)
            if (burst === 1 && !denyCache && !kernel.consume(stored, policy, clock.now + decision.retryAfterMs, cost).allowed) throw new Error(`a wait of ${decision.retryAfterMs} ms that is early`)
          }
          // Without the deny cache every refusal is one the quota gave; with it, one the cache is sure of.
          if (!denyCache && refused > server.refusals - before) throw new Error(`${refused} refusals, ${server.refusals - before} from the quota`)
        }
        const broken = algorithm === 'token-bucket' || algorithm === 'gcra'
          ? bucketBoundHolds(admissions, policy, leases.holdMs)
          : windowBoundHolds(admissions, policy)
        await Promise.all(backends.map(async (backend) => backend.stop()))
        if (broken !== undefined) throw new Error(`${policyFingerprint(policy)}, ${processes} processes, ${JSON.stringify(leases)}: ${broken}`)
      }
    ), { numRuns: 120 })
    t.pass(`${algorithm}: the bound held`)
  }
})

/** One backend with leases on a simulated server, its clock, and a limiter under `policy`. */
function one (policy: Policy, leases: Record<string, unknown> = { maxUnits: 100, holdMs: 100 }, client?: (server: KernelServer) => RedisScriptClient) {
  const server = kernelServer()
  const clock = { now: T0 }
  const backend = testingRedisBackend({ client: client?.(server) ?? server.client(), leases, timeoutMs: 10_000 }, { now: () => clock.now })
  return { server, clock, backend, limiter: backend.limiter('app#hot', policy) }
}

const burst = async (limiter: { consume: (identity: string, cost: number) => Promise<RateDecision> }, n: number, identity = 'k', cost = 1): Promise<RateDecision[]> =>
  Promise.all(Array.from({ length: n }, async () => limiter.consume(identity, cost)))

const giveBacks = (server: KernelServer): string[] => server.log.filter(({ amount }) => amount.startsWith('c')).map(({ amount }) => amount)

t.test('a hot key costs one call per batch: over ten times fewer calls than decisions', async (t) => {
  for (const algorithm of algorithms) {
    const { server, clock, backend, limiter } = one(normalizePolicy({ algorithm, limit: 1_000_000, windowMs: 60_000 }))
    let admitted = 0
    for (let i = 0; i < 40; i++) {
      clock.now += 1
      admitted += (await burst(limiter, 50)).filter((decision) => decision.allowed).length
    }
    t.equal(admitted, 2000, `${algorithm}: every decision admitted`)
    t.ok(server.calls * 10 <= 2000, `${algorithm}: ${server.calls} calls for 2,000 decisions`)
    await backend.stop()
  }
})

t.test('a lease reports the quota\'s numbers: what it holds plus what the quota had left', async (t) => {
  const { clock, limiter } = one(normalizePolicy({ algorithm: 'fixed-window', limit: 1000, windowMs: 1000 }))
  const first = await burst(limiter, 2)
  t.same(first.map((decision) => decision.allowed), [true, true])
  clock.now += 1
  const [leased] = await burst(limiter, 1)
  // A batch of 4 taken (the concurrent pair doubled it twice), 1 used: 3 held, 994 left there.
  t.match(leased, { allowed: true, remaining: 997, resetAt: Math.floor(T0 / 1000) * 1000 + 1000 })
  const [local] = await burst(limiter, 1)
  t.match(local, { allowed: true, remaining: 996 }, 'decided from the lease')
})

t.test('a window\'s unused units go back when its lease ends, and not once its window is over', async (t) => {
  const policy = normalizePolicy({ algorithm: 'fixed-window', limit: 1000, windowMs: 1000 })
  const { server, clock, limiter } = one(policy, { maxUnits: 16, holdMs: 50 })
  clock.now = Math.floor(T0 / 1000) * 1000 + 100
  await burst(limiter, 4) // two decisions, then a lease of 4 for the other two: 2 held
  clock.now += 60 // past its hold, within the window
  await burst(limiter, 1)
  t.same(giveBacks(server), ['c-2'], 'the 2 units it did not use went back; a new lease of 4 holds 3')
  t.match(server.state(limiter.keyOf('k')), { count: 8 }, 'the window counts the 5 used and the 3 held')
  clock.now += 1000 // the window is over: a give-back now would be a gift to the next
  await burst(limiter, 1)
  t.same(giveBacks(server), ['c-2'], 'the late give-back was refused by the quota')
})

t.test('a bucket\'s unused units are not given back', async (t) => {
  const { server, clock, limiter } = one(normalizePolicy({ algorithm: 'token-bucket', limit: 1000, windowMs: 1000 }), { maxUnits: 16, holdMs: 50 })
  await burst(limiter, 4)
  clock.now += 1
  await burst(limiter, 1)
  clock.now += 60
  await burst(limiter, 1)
  t.same(giveBacks(server), [], 'a token given back later would have escaped the bucket\'s cap meanwhile')
})

t.test('no batch room: the request alone is decided by the quota, and its refusal is the quota\'s', async (t) => {
  const policy = normalizePolicy({ algorithm: 'fixed-window', limit: 40, windowMs: 60_000 })
  const server = kernelServer()
  const clock = { now: T0 }
  const process = (leases: boolean): RedisBackendLimiter =>
    testingRedisBackend({ client: server.client(), leases, denyCache: false, timeoutMs: 10_000 }, { now: () => clock.now }).limiter('app#hot', policy)
  const [a, b] = [process(true), process(false)]
  t.same((await burst(a, 4)).map((decision) => decision.remaining), [39, 38, 37, 36], 'a holds 2 of a lease of 4; 34 left at the quota')
  for (let i = 0; i < 32; i++) await b.consume('k', 1)
  clock.now += 1
  t.same([...await burst(a, 1), ...await burst(a, 1)].map((decision) => decision.allowed), [true, true], 'a uses what it holds')
  const [alone] = await burst(a, 1)
  t.match(alone, { allowed: true, remaining: 1 }, 'a batch of 8 did not fit in the 2 left; the request alone did')
  t.same(server.log.slice(-2).map(({ amount }) => amount), ['8', '1'])
  await burst(a, 1)
  const [refused] = await burst(a, 1)
  t.match(refused, { allowed: false, denied: true, remaining: 0, retryAfterMs: 59_999 }, 'the quota\'s refusal and wait')
})

t.test('requests with no units left wait for the lease being taken instead of each calling', async (t) => {
  const { server, clock, limiter } = one(normalizePolicy({ algorithm: 'gcra', limit: 100_000, windowMs: 1000 }))
  await burst(limiter, 8) // two decisions, then leases of 4 and 8: 6 held
  clock.now += 1
  const before = server.calls
  t.ok((await burst(limiter, 2)).every((decision) => decision.allowed), 'from the lease')
  clock.now += 1
  t.ok((await burst(limiter, 8)).every((decision) => decision.allowed), '4 from the lease, then one lease for the other 4')
  t.equal(server.calls - before, 1, 'one call for ten decisions')
})

t.test('a penalized policy takes no leases: a refusal elsewhere must block this process too', async (t) => {
  const { server, limiter } = one(normalizePolicy({ algorithm: 'fixed-window', limit: 1000, windowMs: 1000, penalty: 'restart' }))
  await burst(limiter, 10)
  await burst(limiter, 10)
  t.equal(server.calls, 20, 'every decision went to the quota')
})

t.test('a deleted identity\'s lease is forgotten with its state', async (t) => {
  const { server, clock, limiter } = one(normalizePolicy({ algorithm: 'fixed-window', limit: 1000, windowMs: 1000 }), { maxUnits: 8, holdMs: 1000 })
  await burst(limiter, 4)
  clock.now += 1
  await burst(limiter, 1)
  const calls = server.calls
  await limiter.delete('k').catch(() => false) // the simulated server has no DELETE script
  await burst(limiter, 1)
  t.equal(server.calls, calls + 2, 'the delete, then a decision at the quota, not from the lease')
})

t.test('the quota failing a take rejects the request; the next one asks again', async (t) => {
  let failing = false
  const { limiter } = one(normalizePolicy({ algorithm: 'fixed-window', limit: 1000, windowMs: 1000 }), undefined, (server) => {
    const client = server.client()
    return {
      evalsha: async (sha, keys, ...rest) => { if (failing) throw new Error('connection lost'); return client.evalsha(sha, keys, ...rest) },
      eval: async (script, keys, ...rest) => client.eval(script, keys, ...rest)
    }
  })
  failing = true
  const rejected = await limiter.consume('k', 1).then(() => undefined, (error: unknown) => error)
  t.match(rejected, { code: 'RATES_UNAVAILABLE' })
  failing = false
  t.match(await limiter.consume('k', 1), { allowed: true })
})

t.test('a take that fails after its identity was let go leaves the one followed since alone', async (t) => {
  let fail: (error: Error) => void = () => {}
  const { limiter } = one(normalizePolicy({ algorithm: 'fixed-window', limit: 1000, windowMs: 1000 }), { maxUnits: 8, holdMs: 100, maxEntries: 1 }, (server) => {
    const client = server.client()
    return {
      evalsha: async (sha, keys, ...rest) => rest[0] === limiter.keyOf('slow')
        ? new Promise((_resolve, reject) => { fail = reject })
        : client.evalsha(sha, keys, ...rest),
      eval: async (script, keys, ...rest) => client.eval(script, keys, ...rest)
    }
  })
  const slow = limiter.consume('slow', 1).then(() => undefined, (error: unknown) => error)
  t.match(await limiter.consume('b', 1), { allowed: true }, 'b is followed instead of slow')
  fail(new Error('connection lost'))
  t.match(await slow, { code: 'RATES_UNAVAILABLE' })
  t.match(await limiter.consume('b', 1), { allowed: true })
})

t.test('a give-back that fails is dropped: the units stay counted, nothing is thrown', async (t) => {
  const { server, clock, limiter } = one(normalizePolicy({ algorithm: 'fixed-window', limit: 1000, windowMs: 1000 }), { maxUnits: 16, holdMs: 50 }, (server) => {
    const client = server.client()
    return {
      evalsha: async (sha, keys, ...rest) => { if (String(rest[2]).startsWith('c')) throw new Error('READONLY'); return client.evalsha(sha, keys, ...rest) },
      eval: async (script, keys, ...rest) => client.eval(script, keys, ...rest)
    }
  })
  clock.now = Math.floor(T0 / 1000) * 1000
  await burst(limiter, 4)
  clock.now += 1
  await burst(limiter, 1)
  clock.now += 60
  t.match(await limiter.consume('k', 1), { allowed: true })
  t.same(giveBacks(server), [], 'the give-back failed before the quota')
})

t.test('leases no request comes for are given back by a timer; stop gives back the rest', async (t) => {
  const policy = normalizePolicy({ algorithm: 'fixed-window', limit: 1000, windowMs: 60_000 })
  const { server, clock, backend, limiter } = one(policy, { maxUnits: 16, holdMs: 5 })
  clock.now = Math.floor(T0 / 60_000) * 60_000
  await burst(limiter, 4, 'quiet')
  clock.now += 1
  await burst(limiter, 1, 'quiet')
  clock.now += 10 // its hold is over; no request comes
  await new Promise((resolve) => setTimeout(resolve, 30))
  t.same(giveBacks(server), ['c-1'], 'given back by the sweep')
  await burst(limiter, 4, 'held')
  clock.now += 1
  await burst(limiter, 1, 'held')
  await backend.stop()
  t.same(giveBacks(server), ['c-1', 'c-1'], 'stop gave back the lease still running, and waited for it')
  t.rejects(limiter.consume('held', 1), { code: 'RATES_STOPPED' })
})

t.test('beyond maxEntries the identity followed longest goes, its lease given back', async (t) => {
  const { server, clock, limiter } = one(normalizePolicy({ algorithm: 'fixed-window', limit: 1000, windowMs: 60_000 }), { maxUnits: 16, holdMs: 1000, maxEntries: 1 })
  clock.now = Math.floor(T0 / 60_000) * 60_000
  await burst(limiter, 4, 'a')
  clock.now += 1
  await burst(limiter, 1, 'a')
  await burst(limiter, 1, 'b')
  t.same(giveBacks(server), ['c-1'], 'a\'s lease went back when b came')
})

t.test('the gate on a hot key with leases: the limit exactly, 429s with the quota\'s Retry-After, a fraction of the calls', async (t) => {
  const server = kernelServer()
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, {
    backend: redisBackend({ client: server.client(), timeoutMs: 10_000, leases: true }),
    rateLimit: { algorithm: 'fixed-window', limit: 50, windowMs: 3_600_000 },
    key: () => 'search'
  })
  app.get('/', async () => 'ok')
  await app.ready()
  const replies = await Promise.all(Array.from({ length: 80 }, async () => app.inject('/')))
  const statuses = replies.map((reply) => reply.statusCode)
  t.equal(statuses.filter((status) => status === 200).length, 50, 'the limit, exactly')
  t.equal(statuses.filter((status) => status === 429).length, 30)
  t.ok(replies.filter((reply) => reply.statusCode === 429).every((reply) => Number(reply.headers['retry-after']) >= 1), 'every refusal with a wait')
  t.ok(server.calls < 30, `${server.calls} calls for 80 requests`)
})

t.test('options.leases: defaults, settings, and every bad value a typed error that shows it', async (t) => {
  const client = kernelServer().client()
  t.same(redisBackend({ client }).leases, undefined, 'off by default')
  t.same(redisBackend({ client, leases: false }).leases, undefined)
  t.same(redisBackend({ client, leases: true }).leases, { maxUnits: 100, holdMs: 100, maxEntries: 10_000 })
  t.same(redisBackend({ client, leases: {} }).leases, { maxUnits: 100, holdMs: 100, maxEntries: 10_000 })
  t.same(redisBackend({ client, leases: { maxUnits: 8, holdMs: 20, maxEntries: 5 } }).leases, { maxUnits: 8, holdMs: 20, maxEntries: 5 })
  const cases: Array<[unknown, RegExp]> = [
    ['yes', /`options\.leases` to be true, false or an object \{ maxUnits\?, holdMs\?, maxEntries\? \}, got 'yes' \(string\)/],
    [{ maxUnits: 0 }, /`options\.leases\.maxUnits` to be a positive safe integer, got 0/],
    [{ holdMs: 60_001 }, /`options\.leases\.holdMs` to be a whole number of milliseconds from 1 to 60000, got 60001/],
    [{ holdMs: 1.5 }, /`options\.leases\.holdMs`.*got 1\.5/],
    [{ maxEntries: -1 }, /`options\.leases\.maxEntries`.*got -1/],
    [{ hold: 5 }, /options\.leases/]
  ]
  for (const [leases, message] of cases) {
    t.throws(() => redisBackend({ client, leases: leases as never }), { code: 'RATES_INVALID_ARGUMENT', message }, JSON.stringify(leases))
  }
})
