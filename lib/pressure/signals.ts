import { monitorEventLoopDelay, performance } from 'node:perf_hooks'

/** The process's signals, as one sample reads them. */
export interface PressureReadings {
  /**
   * Mean event-loop delay over the sample, ms. `NaN` from a source is no reading (the histogram
   * recorded nothing: the first sample after start, or a window shorter than its resolution): the
   * sampler keeps the previous value (0 before the first), so it is never over a limit.
   */
  readonly eventLoopDelay: number
  /** Event-loop utilization over the sample, in [0, 1]. */
  readonly eventLoopUtilization: number
  readonly heapUsedBytes: number
  readonly rssBytes: number
}

/** A reason to be under pressure; the names are @fastify/under-pressure's `TYPE_*` values. */
export type Signal = 'eventLoopDelay' | 'heapUsedBytes' | 'rssBytes' | 'healthCheck' | 'eventLoopUtilization'

/** @fastify/under-pressure's names of the signals, with its values: `pressureHandler`'s `type`, `reason.signal`. */
export const TYPE_EVENT_LOOP_DELAY = 'eventLoopDelay' satisfies Signal
export const TYPE_HEAP_USED_BYTES = 'heapUsedBytes' satisfies Signal
export const TYPE_RSS_BYTES = 'rssBytes' satisfies Signal
export const TYPE_HEALTH_CHECK = 'healthCheck' satisfies Signal
export const TYPE_EVENT_LOOP_UTILIZATION = 'eventLoopUtilization' satisfies Signal

/** The order under-pressure checks them in: the first one over its limit is the reason given. */
export const SIGNALS: readonly Signal[] = ['eventLoopDelay', 'heapUsedBytes', 'rssBytes', 'healthCheck', 'eventLoopUtilization']

/** Which signal is over its limit (strictly above, as under-pressure compares), or undefined. */
export function signalOver (readings: PressureReadings, limits: Readonly<Partial<Record<Signal, number>>>, healthy: boolean): Signal | undefined {
  for (const signal of SIGNALS) {
    if (signal === 'healthCheck') {
      if (!healthy) return signal
      continue
    }
    const limit = limits[signal]
    if (limit !== undefined && readings[signal] > limit) return signal
  }
  return undefined
}

/** The histogram's resolution, ms: under-pressure subtracts it from the mean, and so does this. */
const RESOLUTION = 10

/**
 * This process's readings, each over the time since the previous call, computed as
 * @fastify/under-pressure 9 computes them (so that its limits mean the same here), except the
 * utilization: over the last sample (its `eventLoopUtilizationMode: 'interval'`), not cumulative
 * since start, which after an hour of uptime no longer moves.
 */
export function processReadings (): { read: () => PressureReadings, stop: () => void } {
  const histogram = monitorEventLoopDelay({ resolution: RESOLUTION })
  histogram.enable()
  let elu = performance.eventLoopUtilization()
  return {
    read () {
      const mean = histogram.mean / 1e6 - RESOLUTION
      histogram.reset()
      const current = performance.eventLoopUtilization()
      const since = performance.eventLoopUtilization(current, elu)
      elu = current
      const memory = process.memoryUsage()
      return {
        // Nothing recorded (NaN): no reading, which the sampler does not count (under-pressure
        // reads it as Infinity, shedding everything for the first sample after every start). A
        // blocked loop is not missed: the histogram's next tick records how late it came.
        eventLoopDelay: Number.isNaN(mean) ? NaN : Math.max(0, mean),
        // A window shorter than the histogram's resolution is no reading: the first sample, taken
        // as the readings start (at ready()), would read the loop busy with the start itself —
        // utilization near 1 over a few microseconds — and shed every request for a whole interval.
        eventLoopUtilization: since.idle + since.active < RESOLUTION ? NaN : since.utilization,
        heapUsedBytes: memory.heapUsed,
        rssBytes: memory.rss
      }
    },
    stop () { histogram.disable() }
  }
}
