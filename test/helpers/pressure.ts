import type { PressureReadings } from '../../lib/pressure/signals.js'

/** Readings a test sets; `sampled()` resolves once the sampler has read them (no timed wait). */
export function scriptedReadings (initial: Partial<PressureReadings> = {}): {
  read: () => PressureReadings
  set: (change: Partial<PressureReadings>) => Promise<void>
  sampled: () => Promise<void>
  reads: () => number
} {
  let current: PressureReadings = { eventLoopDelay: 0, eventLoopUtilization: 0.1, heapUsedBytes: 1000, rssBytes: 2000, ...initial }
  let waiters: Array<() => void> = []
  let reads = 0
  // The sampler's timer is unref'd: hold the process up while waiting for it.
  const sampled = (): Promise<void> => new Promise((resolve) => {
    const hold = setInterval(() => {}, 1000)
    waiters.push(() => { clearInterval(hold); resolve() })
  })
  return {
    read () {
      reads++
      const due = waiters
      waiters = []
      for (const resolve of due) resolve()
      return current
    },
    // The new readings, taken by the sample after the one under way.
    async set (change) {
      current = { ...current, ...change }
      await sampled()
    },
    sampled,
    reads: () => reads
  }
}

/**
 * A clock for the queue-delay probe: each read moves it on by `step` ms, so each tick (period p)
 * measures a delay of step - p. `step` can be changed as the test goes.
 */
export function steppingClock (step: number): { clock: () => number, setStep: (ms: number) => void } {
  let now = 0
  return {
    clock: () => (now += step),
    setStep: (ms) => { step = ms }
  }
}
