import { performance } from 'node:perf_hooks'

/**
 * Epoch milliseconds that never step back: the process's start time plus a monotonic offset,
 * floored. A wall-clock correction can neither refill nor drain a quota, and flooring keeps every
 * elapsed time a lower bound of the real one, so a wait computed from it is never too short.
 */
export function epochMs (): number {
  return Math.floor(performance.timeOrigin + performance.now())
}
