import { performance } from 'node:perf_hooks'

/**
 * Whole milliseconds on a clock that never steps back (wall-clock corrections would refill or
 * drain buckets). Flooring keeps every elapsed time a lower bound of the real one, so a wait
 * computed from it is never too short.
 */
export function monotonicMs (): number {
  return Math.floor(performance.now())
}
