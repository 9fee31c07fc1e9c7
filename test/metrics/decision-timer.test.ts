import t from 'tap'
import { memoryBackend } from '../../lib/index.js'
import type { BackendLimiter, RatesBackend } from '../../lib/rates/backend.js'
import { DecisionTimer } from '../../lib/metrics/decision-timer.js'

const POLICY = { algorithm: 'token-bucket', limit: 5, windowMs: 1000, burst: 5 } as const

/** A fake monotonic clock: each read returns the next value. */
function clock (...reads: number[]): () => number {
  return () => {
    const next = reads.shift()
    if (next === undefined) throw new Error('the clock was read more often than scripted')
    return next
  }
}

function backendOf (limiter: unknown, extra: Partial<RatesBackend> = {}): RatesBackend {
  return { kind: 'scripted', limiter: () => limiter as BackendLimiter, stop: async () => {}, ...extra }
}

t.test('a round trip is timed from the call to its answer, and to its failure', async (t) => {
  const timer = new DecisionTimer(clock(1000, 1002.5, 2000, 2040))
  const seen: number[] = []
  timer.observe = (seconds) => { seen.push(seconds) }
  const answers = [Promise.resolve({ allowed: true, denied: false, remaining: 1, resetAt: 0 }), Promise.reject(new Error('down'))]
  const limiter = timer.over(backendOf({ policy: POLICY, consume: () => answers.shift(), state: async () => 'state', delete: async () => true })).limiter('a', POLICY)
  t.same(await limiter.consume('k', 1), { allowed: true, denied: false, remaining: 1, resetAt: 0 })
  await t.rejects(limiter.consume('k', 1), /down/)
  t.same(seen, [0.0025, 0.04])
  t.equal(limiter.policy, POLICY)
  t.equal(await limiter.state('k'), 'state', 'state and delete are the backend\'s own')
  t.equal(await limiter.delete('k'), true)
})

t.test('a synchronous throw reaches the caller as it is, with no observation', async (t) => {
  const timer = new DecisionTimer(clock(1))
  timer.observe = () => { t.fail('nothing to observe') }
  const limiter = timer.over(backendOf({ policy: POLICY, consume: () => { throw new TypeError('boom') }, state: async () => undefined, delete: async () => false })).limiter('a', POLICY)
  t.throws(() => limiter.consume('k', 1), TypeError)
})

t.test('synchronous limiters (memory) and junk are passed on untouched; the rest of the backend is its own', async (t) => {
  const memory = memoryBackend()
  const timer = new DecisionTimer(clock())
  const timed = timer.over(memory)
  const direct = timed.limiter('m', POLICY)
  t.ok(direct.synchronous, 'the gate keeps deciding on its own stack')
  t.equal(timed.kind, 'memory')
  t.equal(timed.identities, 0)
  await timed.stop()
  for (const junk of [undefined, null, 'junk', { consume: 1 }, { consume: () => {} }, { consume: () => {}, state: () => {} }]) {
    t.equal(timer.over(backendOf(junk)).limiter('x', POLICY), junk as never)
  }
  // The default clock is the process's monotonic one.
  t.type(new DecisionTimer().observe, 'function')
  new DecisionTimer().observe(1)
})
