// The memory backend: its options, RATES_MAX_IDENTITIES, and the bound (new identities refused with
// RATES_UNAVAILABLE and an honest retryAfterMs; live state never evicted or reset), through the plugin.
import t, { type Test } from 'tap'
import fc from 'fast-check'
import { spawnSync } from 'node:child_process'
import Fastify, { type FastifyInstance } from 'fastify'
import admission, {
  memoryBackend, MemoryBackend, RatesInvalidArgumentError, RatesUnavailableError,
  type RateDecision, type RateLimiter, type RatePolicy
} from '../../../lib/index.js'
import type { Algorithm } from '../../../lib/core/rates/types.js'
import { DEFAULT_MAX_IDENTITIES, MAX_IDENTITIES_VARIABLE } from '../../../lib/backends/memory/memory-backend.js'
import { thrown } from '../../helpers/errors.js'

const T0 = 1_700_000_000_000
const VARIABLE = 'RATES_MAX_IDENTITIES'

type Tap = Test

/** Sets RATES_MAX_IDENTITIES (or unsets it: undefined) for one test, restoring it afterwards. */
function withVariable (t: Tap, value: string | undefined): void {
  const had = Object.prototype.hasOwnProperty.call(process.env, VARIABLE)
  const old = process.env[VARIABLE]
  if (value === undefined) delete process.env[VARIABLE]
  else process.env[VARIABLE] = value
  t.teardown(() => {
    if (had) process.env[VARIABLE] = old
    else delete process.env[VARIABLE]
  })
}

async function build (t: Tap, clock: { now: number }, maxIdentities: number): Promise<FastifyInstance> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend: memoryBackend({ maxIdentities, clock: () => clock.now }), rateLimit: false })
  return app
}

/** What consume() settles with: the decision, or the error it rejects with. */
async function settle (l: RateLimiter, identity: string, cost = 1): Promise<RateDecision | Error> {
  try {
    return await l.consume(identity, { cost })
  } catch (error) {
    return error as Error
  }
}

t.test('memoryBackend() options', async (t) => {
  withVariable(t, undefined)
  const plain = memoryBackend()
  t.type(plain, MemoryBackend)
  t.equal(plain.kind, 'memory')
  t.equal(plain.maxIdentities, DEFAULT_MAX_IDENTITIES)
  t.equal(DEFAULT_MAX_IDENTITIES, 1_000_000)
  t.equal(MAX_IDENTITIES_VARIABLE, VARIABLE)
  t.equal(memoryBackend(undefined).maxIdentities, 1_000_000)
  t.equal(memoryBackend({}).maxIdentities, 1_000_000)
  t.equal(memoryBackend({ maxIdentities: undefined, clock: undefined }).maxIdentities, 1_000_000, 'undefined is absent')
  t.equal(memoryBackend({ maxIdentities: 1 }).maxIdentities, 1)
  t.equal(memoryBackend({ maxIdentities: Number.MAX_SAFE_INTEGER }).maxIdentities, Number.MAX_SAFE_INTEGER)
  const clock = (): number => 42
  t.equal(memoryBackend({ clock }).clock, clock)
  const now = plain.clock()
  t.ok(Number.isSafeInteger(now) && Math.abs(now - Date.now()) < 1000, 'the default clock: whole epoch milliseconds')
  t.ok(plain.clock() >= now, 'that do not step back')

  const bad: Array<[unknown, string]> = [
    [null, 'options'],
    [1, 'options'],
    ['x', 'options'],
    [[], 'options'],
    [() => ({}), 'options'],
    [Object.create(null), 'options'],
    [new (class Options { maxIdentities = 1 })(), 'options'],
    [{ maxidentities: 1 }, 'options.maxidentities'],
    [{ maxIdentities: 1, backend: 'redis' }, 'options.backend'],
    [{ [Symbol('clock')]: () => 1 }, 'options.Symbol(clock)'],
    [{ maxIdentities: 0 }, 'options.maxIdentities'],
    [{ maxIdentities: -1 }, 'options.maxIdentities'],
    [{ maxIdentities: 1.5 }, 'options.maxIdentities'],
    [{ maxIdentities: Number.NaN }, 'options.maxIdentities'],
    [{ maxIdentities: Number.POSITIVE_INFINITY }, 'options.maxIdentities'],
    [{ maxIdentities: 2 ** 53 }, 'options.maxIdentities'],
    [{ maxIdentities: '3' }, 'options.maxIdentities'],
    [{ maxIdentities: 3n }, 'options.maxIdentities'],
    [{ maxIdentities: null }, 'options.maxIdentities'],
    [{ clock: 5 }, 'options.clock'],
    [{ clock: 'Date.now' }, 'options.clock'],
    [{ clock: null }, 'options.clock'],
    [{ clock: { now: () => 1 } }, 'options.clock']
  ]
  for (const [options, path] of bad) {
    const error = thrown(() => memoryBackend(options as never))
    t.type(error, RatesInvalidArgumentError, `${path}`)
    t.match(error, { code: 'RATES_INVALID_ARGUMENT', path })
  }
  t.match((thrown(() => memoryBackend({ maxIdentities: 0 })) as Error).message, 'Expected `options.maxIdentities` to be a positive safe integer')
  t.match((thrown(() => memoryBackend({ clock: 5 } as never)) as Error).message, 'a function returning epoch milliseconds')
})

t.test('RATES_MAX_IDENTITIES: used when maxIdentities is unset', async (t) => {
  t.test('a valid value', async (t) => {
    withVariable(t, '2')
    t.equal(memoryBackend().maxIdentities, 2)
    t.equal(memoryBackend({ maxIdentities: 5 }).maxIdentities, 5, 'the option wins')
  })
  t.test('the largest safe integer', async (t) => {
    withVariable(t, String(Number.MAX_SAFE_INTEGER))
    t.equal(memoryBackend().maxIdentities, Number.MAX_SAFE_INTEGER)
  })
  t.test('through the plugin without a backend: the bound applies', async (t) => {
    withVariable(t, '1')
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(admission, { rateLimit: false })
    await app.ready()
    const l = app.rates.use('one', { algorithm: 'fixed-window', limit: 5, windowMs: 60_000 })
    t.equal((await l.consume('a')).allowed, true)
    await t.rejects(l.consume('b'), RatesUnavailableError, 'a second identity is one too many')
  })
})

t.test('RATES_MAX_IDENTITIES: an invalid value fails, naming the variable', async (t) => {
  for (const value of ['0', 'abc', '1e3', '-5', '9007199254740993', '', ' 5', '5 ', '+5', '05', '1.0', '0x10', '١٢']) {
    t.test(JSON.stringify(value), async (t) => {
      withVariable(t, value)
      const error = thrown(() => memoryBackend())
      t.type(error, RatesInvalidArgumentError)
      t.match(error, { code: 'RATES_INVALID_ARGUMENT', path: VARIABLE, value })
      t.match((error as Error).message, `Expected \`${VARIABLE}\` to be a positive integer in decimal digits (the environment variable)`)
      t.equal(memoryBackend({ maxIdentities: 7 }).maxIdentities, 7, 'unread when the option is given')

      // The plugin without a backend: the error comes out of register() or ready().
      const app = Fastify()
      t.teardown(() => app.close())
      app.register(admission)
      const failure = await app.ready().then(() => undefined, (e: unknown) => e)
      t.type(failure, RatesInvalidArgumentError, 'the app does not start')
      t.match(failure, { path: VARIABLE })
      t.match((failure as Error).message, VARIABLE)

      // With a bound given to the backend, the variable is not read.
      const fine = Fastify()
      t.teardown(() => fine.close())
      await fine.register(admission, { backend: memoryBackend({ maxIdentities: 3 }) })
      await fine.ready()
      t.pass('maxIdentities given: the variable is not read')
    })
  }
})

t.test('the bound: the (N+1)th live identity waits until the earliest state recovers', async (t) => {
  const clock = { now: T0 }
  const app = await build(t, clock, 3)
  // token-bucket, 10 per second: a unit takes 100 ms to come back.
  const l = app.rates.use('bounded', { algorithm: 'token-bucket', limit: 10, windowMs: 1000 })
  const other = app.rates.use('other', { algorithm: 'token-bucket', limit: 10, windowMs: 1000 })
  t.equal((await l.consume('A', { cost: 5 })).resetAt, T0 + 500)
  clock.now = T0 + 10
  t.equal((await l.consume('B', { cost: 1 })).resetAt, T0 + 110, 'B, the earliest to recover')
  clock.now = T0 + 20
  t.equal((await l.consume('C', { cost: 3 })).resetAt, T0 + 320)
  t.equal(app.admission.stats().identities, 3)

  clock.now = T0 + 50
  const refused = await settle(l, 'D')
  t.type(refused, RatesUnavailableError, 'D: no room while A, B and C are live')
  t.match(refused, { code: 'RATES_UNAVAILABLE', name: 'RatesUnavailableError', retryAfterMs: 60 })
  t.match((refused as Error).message, 'The rates backend cannot decide: the memory backend tracks 3 identities for this limiter, all with live state (retry after 60 ms)')
  t.type(await settle(l, 'E', 10), RatesUnavailableError, 'whatever the cost')
  // Known identities still get decisions, allow or deny.
  t.strictSame(await l.consume('A', { cost: 5 }), { allowed: true, denied: false, remaining: 0, resetAt: T0 + 1000, moreAt: T0 + 100 }, '0.5 tokens left: the next whole one in 50 ms')
  t.match(await l.consume('A'), { denied: true, retryAfterMs: 50 }, 'A is denied, a decision')
  t.equal((await other.consume('D')).allowed, true, 'the bound is per limiter')
  t.equal(app.admission.stats().identities, 4, 'identities are counted over all limiters')

  clock.now = T0 + 109
  t.match(await settle(l, 'D'), { code: 'RATES_UNAVAILABLE', retryAfterMs: 1 }, 'one millisecond early')
  clock.now = T0 + 110
  t.strictSame(await l.consume('D'), { allowed: true, denied: false, remaining: 9, resetAt: T0 + 210, moreAt: T0 + 210 }, 'B recovered: D is admitted')
  t.equal(app.admission.stats().identities, 4, 'B was dropped, D took its place')

  // Live state was never reset: A and C go on from where they were.
  t.strictSame(await l.consume('A'), { allowed: true, denied: false, remaining: 0, resetAt: T0 + 1100, moreAt: T0 + 200 }, 'A refilled 1.1 units since T0 + 50 (0.1 left: the next whole one in 90 ms)')
  t.strictSame(await l.consume('C'), { allowed: true, denied: false, remaining: 6, resetAt: T0 + 420, moreAt: T0 + 120 }, 'C: 10 - 3 + 0.9 refilled - 1 = 6.9 (a reset would leave 9); the 7th whole one in 10 ms')
  // B comes back as new; the table is full again (A, C, D live).
  t.type(await settle(l, 'B'), RatesUnavailableError)
})

t.test('state is dropped only once recovered, and only to make room', async (t) => {
  const clock = { now: T0 }
  const app = await build(t, clock, 3)
  const l = app.rates.use('drop', { algorithm: 'fixed-window', limit: 2, windowMs: 1000 })
  for (const id of ['A', 'B', 'C']) await l.consume(id)
  t.equal(app.admission.stats().identities, 3)
  clock.now = T0 + 10 * 1000
  t.equal(app.admission.stats().identities, 3, 'recovered states are not dropped by time alone')
  t.strictSame(await l.consume('A'), { allowed: true, denied: false, remaining: 1, resetAt: T0 + 11_000, moreAt: T0 + 11_000 }, 'a recovered state decides like a new one')
  t.equal(app.admission.stats().identities, 3, 'a known identity takes no room')
  t.equal((await l.consume('D')).allowed, true, 'a new identity at the bound: the recovered ones make room')
  t.equal(app.admission.stats().identities, 2, 'B and C were dropped (recovered); A (live) and D remain')
  t.equal((await l.consume('E')).allowed, true, 'room for E')
  t.equal(app.admission.stats().identities, 3)
  t.match(await l.consume('A'), { allowed: true, remaining: 0 }, 'A kept its state: its second unit of the window')
  t.type(await settle(l, 'F'), RatesUnavailableError, 'A, D and E are live')
})

t.test('stats().identities after a flood of clients: the states held, recovered ones until their room is needed', async (t) => {
  const clock = { now: T0 }
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, {
    backend: memoryBackend({ maxIdentities: 60, clock: () => clock.now }),
    rateLimit: { algorithm: 'fixed-window', limit: 5, windowMs: 1000 },
    key: (request) => String(request.headers['x-client'])
  })
  app.get('/', async () => 'ok')
  const as = async (client: string): Promise<number> => (await app.inject({ url: '/', headers: { 'x-client': client } })).statusCode
  for (let i = 0; i < 50; i++) t.equal(await as(`flood-${i}`), 200)
  t.equal(app.admission.stats().identities, 50)
  clock.now = T0 + 60_000
  t.equal(app.admission.stats().identities, 50, 'an idle minute later every state has recovered, and each is still held')
  t.equal(await as('flood-0'), 200)
  t.equal(app.admission.stats().identities, 50, 'a client that comes back takes its own state again')
  for (let i = 0; i < 10; i++) t.equal(await as(`later-${i}`), 200)
  t.equal(app.admission.stats().identities, 60, 'new clients below the bound take new room: nothing is dropped yet')
  t.equal(await as('one-more'), 200, 'at the bound a new client is admitted: the recovered states make room')
  t.equal(app.admission.stats().identities, 12, 'the 49 recovered ones were dropped; flood-0 and the later ones are live, with one-more')
})

t.test('the bound through the HTTP gate: 503 with Retry-After, counted as unavailable', async (t) => {
  const clock = { now: T0 }
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, {
    backend: memoryBackend({ maxIdentities: 2, clock: () => clock.now }),
    rateLimit: { algorithm: 'fixed-window', limit: 5, windowMs: 2500 },
    key: (request) => String(request.headers['x-client'])
  })
  app.get('/', async () => 'ok')
  const as = (client: string): Promise<{ statusCode: number, headers: Record<string, unknown> }> => app.inject({ url: '/', headers: { 'x-client': client } })
  clock.now = T0 + 100
  t.equal((await as('a')).statusCode, 200)
  t.equal((await as('b')).statusCode, 200)
  const full = await as('c')
  t.equal(full.statusCode, 503)
  t.equal(full.headers['retry-after'], '3', 'ceil(2400 / 1000): until the window of a and b ends')
  t.match(app.admission.stats(), { admitted: 2, shed: 0, unavailable: 1, limited: 0, identities: 2 })
  clock.now = T0 + 2500
  t.equal((await as('c')).statusCode, 200)
})

const ALGORITHMS: readonly Algorithm[] = ['token-bucket', 'fixed-window', 'sliding-window-counter', 'gcra']

t.test('property: refused only when N live states, never reset, and the wait is never early', async (t) => {
  let saturations = 0
  let retried = 0
  await fc.assert(fc.asyncProperty(
    fc.constantFrom(...ALGORITHMS),
    fc.integer({ min: 1, max: 6 }),
    fc.integer({ min: 1, max: 3000 }),
    fc.integer({ min: 1, max: 4 }),
    fc.array(fc.record({ id: fc.integer({ min: 0, max: 6 }), dt: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 50 }), fc.integer({ min: 0, max: 4000 })), share: fc.double({ min: 0, max: 1, noNaN: true }), retry: fc.boolean() }), { minLength: 1, maxLength: 40 }),
    async (algorithm, limit, windowMs, maxIdentities, steps) => {
      const clock = { now: T0 }
      const app = Fastify()
      try {
        await app.register(admission, { backend: memoryBackend({ maxIdentities, clock: () => clock.now }), rateLimit: false })
        const policy: RatePolicy = { algorithm, limit, windowMs }
        const l = app.rates.use('p', policy)
        const worst = algorithm === 'sliding-window-counter' ? 2 * windowMs : windowMs
        // Each identity's resetAt from its last decision: when its state has fully recovered.
        const recovers = new Map<string, number>()
        const live = (): number[] => [...recovers.values()].filter((at) => at > clock.now)
        for (const step of steps) {
          clock.now += step.dt
          const id = `id${step.id}`
          const cost = Math.min(limit, 1 + Math.floor(step.share * limit))
          const known = (recovers.get(id) ?? 0) > clock.now
          let outcome = await settle(l, id, cost)
          if (outcome instanceof RatesUnavailableError) {
            saturations++
            if (known) throw new Error(`${id} has live state but was refused at ${clock.now}`)
            const alive = live()
            if (alive.length < maxIdentities) throw new Error(`refused at ${clock.now} with ${alive.length} of ${maxIdentities} states live`)
            const wait = outcome.retryAfterMs
            if (wait === undefined || !Number.isSafeInteger(wait) || wait < 1) throw new Error(`retryAfterMs ${String(wait)}`)
            if (clock.now + wait < Math.min(...alive)) throw new Error(`early: waits ${wait} at ${clock.now}, earliest recovery ${Math.min(...alive)}`)
            if (wait > worst) throw new Error(`waits ${wait}, more than any state needs (${worst})`)
            if (!step.retry) continue
            retried++
            clock.now += wait
            outcome = await settle(l, id, cost)
            if (outcome instanceof Error) throw new Error(`still refused after waiting ${wait}: ${outcome.message}`)
          } else if (outcome instanceof Error) {
            throw outcome
          }
          recovers.set(id, outcome.resetAt)
        }
      } finally {
        await app.close()
      }
    }
  ), { numRuns: 200 })
  t.ok(saturations > 0 && retried > 0, `saturations: ${saturations}, retried: ${retried}`)
})

// Guards the exact wait at the bound: a state placed right after a sweep is known to the table (not the worst case).
t.test('retryAfterMs at the bound is the time until the earliest state recovers, also right after a sweep', async (t) => {
  const clock = { now: T0 }
  const app = await build(t, clock, 3)
  const l = app.rates.use('bounded', { algorithm: 'token-bucket', limit: 10, windowMs: 1000 })
  await l.consume('A', { cost: 5 }) // recovers at T0 + 500
  clock.now = T0 + 10
  await l.consume('B') // T0 + 110
  clock.now = T0 + 20
  await l.consume('C', { cost: 3 }) // T0 + 320
  clock.now = T0 + 110
  t.match(await l.consume('D'), { allowed: true, resetAt: T0 + 210 }, 'B swept, D in its slot')
  const refused = await settle(l, 'E')
  t.type(refused, RatesUnavailableError)
  t.equal((refused as RatesUnavailableError).retryAfterMs, 100, 'D, the earliest, recovers at T0 + 210')
})

// Guards a conflicting gate policy on a shared backend reaching ready() as an error (run in a child process, it used to crash it).
t.test('a gate policy conflicting on a shared backend fails register()/ready(), never the process', async (t) => {
  const script = `
    import Fastify from 'fastify'
    import admission, { memoryBackend } from './lib/index.ts'
    const backend = memoryBackend()
    const first = Fastify()
    await first.register(admission, { backend, rateLimit: { limit: 10, windowMs: 1000 } })
    await first.ready()
    const second = Fastify()
    try {
      await second.register(admission, { backend, rateLimit: { limit: 20, windowMs: 1000 } })
      await second.ready()
      console.log('ready')
    } catch (error) {
      console.log('rejected ' + error.code)
    }
    await first.close()
  `
  const run = spawnSync(process.execPath, [...process.execArgv, '--input-type=module', '-e', script], { cwd: process.cwd(), encoding: 'utf8', timeout: 30_000 })
  t.equal(run.status, 0, `the process survives (stderr: ${run.stderr.split('\n').slice(0, 8).join(' | ')})`)
  t.equal(run.stdout.trim(), 'rejected RATES_POLICY_CONFLICT')
})
