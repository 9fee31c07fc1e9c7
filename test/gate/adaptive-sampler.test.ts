import t from 'tap'
import { mock } from 'node:test'
import { adaptiveLimitOptions } from '../../lib/core/adaptive/limit.js'
import { AdaptiveSampler, WINDOW_MIN_MS, WINDOW_MIN_SAMPLES } from '../../lib/gate/release/adaptive-sampler.js'
import { HELD_SLOT, Slots } from '../../lib/gate/release/slots.js'
import { newCounters } from '../../lib/metrics/counters.js'

// The adaptive gate's glue with its clock passed in and Node's mock timers: the sample windows,
// the probe timer and its clearing at close, step by step. No real time passes.
function gate (options = {}, reserve = 0.1): { permits: AdaptiveSampler, slots: Slots, global: ReturnType<typeof newCounters>, clock: { now: number } } {
  const clock = { now: 0 }
  const global = newCounters()
  const slots = new Slots(global, 0, reserve)
  const permits = new AdaptiveSampler(slots, adaptiveLimitOptions({ initial: 10, probeIntervalMs: 100, ...options }), () => clock.now)
  return { permits, slots, global, clock }
}

/** One window of samples, `rtt` ms each, at full utilization; the clock moves `rtt` per sample. */
function window (g: ReturnType<typeof gate>, rtt: number): void {
  g.global.inFlight = g.slots.limit
  for (let i = 0; i < WINDOW_MIN_SAMPLES; i++) {
    g.clock.now += rtt
    g.permits.sample(rtt)
  }
}

t.test('a window closes after enough samples and at least one round trip', async (t) => {
  const g = gate()
  g.global.inFlight = 10
  g.permits.sample(20)
  g.permits.sample(20)
  t.equal(g.permits.adaptive.baseline, 0, 'two samples: still open')
  g.permits.sample(20)
  t.equal(g.permits.adaptive.baseline, 0, `three, but less than ${WINDOW_MIN_MS} ms: still open`)
  g.clock.now += WINDOW_MIN_MS
  g.permits.sample(24)
  t.equal(g.permits.adaptive.baseline, 21, 'closed: the mean RTT')
  t.equal(g.slots.retryAfter, 1, '21 ms: 1 s')
  // A round trip longer than WINDOW_MIN_MS keeps the window open for that long.
  for (let i = 0; i < 3; i++) g.permits.sample(31)
  g.clock.now += 6
  g.permits.sample(31)
  t.equal(g.permits.adaptive.fast, 21, '6 ms is less than the 21 ms round trip: still open')
  g.clock.now += 15
  g.permits.sample(31)
  t.equal(g.permits.adaptive.fast, 22, 'closed after 21 ms: the fast RTT moved a tenth of the way to 31')
})

/** Mock timers on, and a gate whose baseline is 10 ms that has queued long enough to probe. */
function probing (t: { teardown: (fn: () => void) => void }): ReturnType<typeof gate> {
  mock.timers.enable({ apis: ['setTimeout'] })
  t.teardown(() => { mock.timers.reset() })
  const g = gate()
  window(g, 10)
  while (!g.permits.adaptive.probing) window(g, 40)
  return g
}

t.test('a probe with no traffic is ended by its timer; the limit comes back', async (t) => {
  mock.timers.enable({ apis: ['setTimeout'] })
  t.teardown(() => { mock.timers.reset() })
  const g = gate()
  window(g, 10)
  window(g, 10)
  const before = g.slots.limit
  // Queueing for longer than probeIntervalMs: a probe halves the limit.
  while (!g.permits.adaptive.probing) window(g, 40)
  t.ok(g.slots.limit < before, `probing at ${g.slots.limit}`)
  const estimate = Math.floor(g.permits.adaptive.estimate)
  // The timer fires before the probe is overdue (the clock stood still): it waits again.
  mock.timers.tick(1000)
  t.ok(g.permits.adaptive.probing, 'not overdue yet: still probing')
  g.clock.now += 1000
  mock.timers.tick(1000)
  t.notOk(g.permits.adaptive.probing, 'overdue: ended by the timer')
  t.equal(g.slots.limit, estimate, 'the limit is the estimate again')
})

t.test('stop() clears the timer, and a probe after it arms none', async (t) => {
  const g = probing(t)
  g.permits.stop()
  g.clock.now += 10_000
  mock.timers.tick(10_000)
  t.ok(g.permits.adaptive.probing, 'no timer ran after stop()')
  // The probe ends by samples (late responses after close), and a new one starts: no timer.
  while (g.permits.adaptive.probing) window(g, 10)
  while (!g.permits.adaptive.probing) window(g, 40)
  mock.timers.tick(10_000)
  t.ok(g.permits.adaptive.probing)
})

t.test('a probe ended by samples: the timer then waits for idleness', async (t) => {
  const g = probing(t)
  while (g.permits.adaptive.probing) window(g, 10)
  const state = g.permits.adaptive
  const idleMs = adaptiveLimitOptions().idleMs
  g.clock.now += idleMs - 1
  mock.timers.tick(idleMs - 1)
  t.equal(g.permits.adaptive, state, 'idleMs - 1 after the last use: unchanged (a tick at the probe\'s old end changed nothing)')
  g.global.inFlight = 0
  g.clock.now += 1
  mock.timers.tick(1)
  t.equal(g.slots.limit, 10, 'idleMs after the last use, with nothing in flight: the initial limit')
  t.equal(g.permits.adaptive.baseline, 0, 'the RTTs are learnt again')
})

// A flood of cheap answers: 0.1 ms each, two in flight, and one window in ten a busy turn of the
// event loop (1 ms); three samples per window, 2 ms of clock apart, for `ms`.
function cheap (g: ReturnType<typeof gate>, ms: number): void {
  const end = g.clock.now + ms
  for (let i = 0; g.clock.now < end; i++) {
    g.global.inFlight = 2
    for (let j = 0; j < WINDOW_MIN_SAMPLES; j++) {
      g.clock.now += 2
      g.permits.sample(i % 10 === 0 ? 1 : 0.1)
    }
  }
}

t.test('after a flood of cheap answers and 5 s idle, a burst meets the limit of a fresh gate', async (t) => {
  mock.timers.enable({ apis: ['setTimeout'] })
  t.teardown(() => { mock.timers.reset() })
  // The plugin's settings: initial 20, the default probe interval, the window's fast weight.
  const settings = { initial: 20, probeIntervalMs: 2_000, fastWeight: 0.3 }
  const g = gate(settings)
  for (let i = 0; i < 15; i++) window(g, 10)
  const warm = g.slots.limit
  t.ok(warm > 20, `warm: ${warm}`)
  cheap(g, 3_000)
  t.ok(g.slots.limit <= 10, `3 s of cheap answers: ${g.slots.limit}`)
  g.permits.sample(0.1) // the flood's last answer, in a window left open
  g.global.inFlight = 0
  g.clock.now += 5_000
  mock.timers.tick(5_000)
  const fresh = gate(settings)
  fresh.clock.now = g.clock.now
  t.equal(g.slots.limit, fresh.slots.limit, `the limit a burst meets: ${g.slots.limit}, a fresh gate's ${fresh.slots.limit}`)
  t.equal(g.slots.retryAfter, 1)
  // The burst's own windows lead where a fresh gate's do.
  for (let i = 0; i < 10; i++) {
    window(g, 10)
    window(fresh, 10)
    t.equal(g.slots.limit, fresh.slots.limit)
  }
})

t.test('a hang is no idleness: with the gate full and nothing completing, the limit stays', async (t) => {
  mock.timers.enable({ apis: ['setTimeout'] })
  t.teardown(() => { mock.timers.reset() })
  const g = gate()
  for (let i = 0; i < 10; i++) window(g, 10)
  const limit = g.slots.limit
  g.global.inFlight = limit
  for (let i = 0; i < 10; i++) {
    g.clock.now += 5_000
    mock.timers.tick(5_000)
  }
  t.equal(g.slots.limit, limit, 'kept through 50 s of ticks that saw it full')
  t.equal(g.permits.adaptive.baseline, 10)
  // The stuck requests leave; idleMs after the last tick that saw them, the limit is fresh.
  g.global.inFlight = 0
  g.clock.now += 5_000
  mock.timers.tick(5_000)
  t.equal(g.permits.adaptive.baseline, 0)
  t.equal(g.slots.limit, Math.max(10, limit), 'never below the limit learnt')
})


t.test('beside the queue-delay probe, requests that end while the loop has a standing queue are no samples', async (t) => {
  const clock = { now: 0 }
  const global = newCounters()
  const slots = new Slots(global, 0, 0.1)
  const loop = { standing: true }
  const permits = new AdaptiveSampler(slots, adaptiveLimitOptions({ initial: 10, probeIntervalMs: 100 }), () => clock.now, () => loop.standing)
  // A permit that held a global slot and was answered 200 after `rtt` ms.
  const ended = (rtt: number): void => {
    clock.now += rtt
    permits.ended({ held: HELD_SLOT, reply: { statusCode: 200, elapsedTime: rtt } } as unknown as Parameters<AdaptiveSampler['ended']>[0], 'responded')
  }
  global.inFlight = 10
  for (let i = 0; i < 20; i++) ended(10)
  t.equal(permits.adaptive.baseline, 0, 'the loop queued: no window closed')
  t.equal(slots.limit, 10, 'the limit is where it started')
  loop.standing = false
  for (let i = 0; i < WINDOW_MIN_SAMPLES; i++) ended(10)
  t.equal(permits.adaptive.baseline, 10, 'the loop free: a window of samples')
  loop.standing = true
  for (let i = 0; i < 40; i++) ended(80)
  t.equal(permits.adaptive.fast, 10, 'a busy loop\'s slow answers do not move the fast RTT')
  t.equal(slots.limit, permits.adaptive.limit, 'nor the limit')
  t.ok(slots.limit >= 10, `limit ${slots.limit}: not cut`)
})
