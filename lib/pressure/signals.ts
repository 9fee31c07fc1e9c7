import { createHistogram, performance, type EventLoopUtilization } from 'node:perf_hooks'

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
 *
 * The delay is measured from this call on (the plugin's registration), by a histogram of the
 * loop's turns: a tick every `RESOLUTION` ms records how long since the one before, and so does
 * every `read`. Node's `monitorEventLoopDelay` records nothing at its first tick, so a loop blocked
 * in its first 10 ms went unseen; here the first mark is taken at once, and a block is seen by the
 * first tick or read after it, whenever it happens. `stop` ends the ticks.
 */
export function processReadings (): { read: () => PressureReadings, stop: () => void } {
  const histogram = createHistogram()
  histogram.recordDelta()
  const ticks = setInterval(() => { histogram.recordDelta() }, RESOLUTION).unref()
  let elu: EventLoopUtilization | undefined
  return {
    read () {
      histogram.recordDelta()
      const mean = histogram.mean / 1e6 - RESOLUTION
      histogram.reset()
      const current = performance.eventLoopUtilization()
      const since = elu === undefined ? undefined : performance.eventLoopUtilization(current, elu)
      elu = current
      const memory = process.memoryUsage()
      return {
        // Always a reading: the read records its own delta (under-pressure's first sample reads
        // nothing, which it takes as Infinity, shedding everything for a sample after every start).
        eventLoopDelay: Math.max(0, mean),
        // The utilization is measured from the first read (at ready()), not from registration:
        // the start itself keeps the loop busy, and would read near 1 and shed every request for
        // a whole interval. The first read, and any window shorter than the resolution, is no reading.
        eventLoopUtilization: since === undefined || since.idle + since.active < RESOLUTION ? NaN : since.utilization,
        heapUsedBytes: memory.heapUsed,
        rssBytes: memory.rss
      }
    },
    stop () { clearInterval(ticks) }
  }
}
