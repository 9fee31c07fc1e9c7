import { performance } from 'node:perf_hooks'
import type { FastifyBaseLogger, FastifyInstance } from 'fastify'
import { Contained } from '../callbacks/contained.js'
import type { PressureSettings } from './options.js'
import { processReadings, signalOver, type PressureReadings, type Signal } from './signals.js'

const NO_READINGS: PressureReadings = Object.freeze({ eventLoopDelay: 0, eventLoopUtilization: 0, heapUsedBytes: 0, rssBytes: 0 })

/** `next`, where a reading is `NaN` (nothing measured) the one of `previous`. */
function kept (previous: PressureReadings, next: PressureReadings): PressureReadings {
  const value = (signal: keyof PressureReadings): number => Number.isNaN(next[signal]) ? previous[signal] : next[signal]
  return {
    eventLoopDelay: value('eventLoopDelay'),
    eventLoopUtilization: value('eventLoopUtilization'),
    heapUsedBytes: value('heapUsedBytes'),
    rssBytes: value('rssBytes')
  }
}

/**
 * Reads the signals every `sampleInterval` on an unref'd timer (never per request) and keeps the
 * verdict — the signal over its limit, if any — where the request hook reads it as one field.
 * `healthCheck` runs on its own timer, one run at a time; unhealthy until its first run says
 * otherwise (as under-pressure). The readings begin when it is made, at registration (a loop blocked
 * before `ready()` is measured), the samples at `onReady`; everything stops at `onClose`, which
 * runs on a registration that failed too.
 *
 * The status route asks for the health check's answer (`health`) at whatever rate it is called:
 * an answer younger than `sampleInterval` is reused, and a run under way is shared, so that any
 * number of calls run the check at most once per interval (the readings it reports are that old too).
 */
export class Sampler {
  /** The signal over its limit, or undefined: what the request hook reads. */
  over: Signal | undefined = undefined
  readings: PressureReadings = NO_READINGS
  /** Whether the latest health check passed (true when there is none). */
  healthy: boolean
  private readonly settings: PressureSettings
  private readonly fastify: FastifyInstance
  private readonly log: FastifyBaseLogger
  /** The application's `healthCheck` and `readings`, inside the error boundary. */
  private readonly healthCalls: Contained
  private readonly readingCalls: Contained
  private readonly changed: () => void
  private readonly source: { read: () => PressureReadings, stop: () => void }
  private timer: NodeJS.Timeout | undefined
  private healthTimer: NodeJS.Timeout | undefined
  private stopped = false
  /** The health check's run under way, which every caller shares. */
  private running: Promise<unknown> | undefined
  /** Its latest answer, and when that run ended (`performance.now()`). */
  private answer: unknown
  private answeredAt = -Infinity

  /** `changed` runs after a sample changes the verdict. */
  constructor (settings: PressureSettings, fastify: FastifyInstance, changed: () => void) {
    this.settings = settings
    this.fastify = fastify
    this.log = fastify.log
    this.healthCalls = new Contained(this.log, 'healthCheck', undefined, 'the server counts as unhealthy until it passes')
    this.readingCalls = new Contained(this.log, 'readings', undefined, 'keeping the previous readings')
    this.changed = changed
    this.healthy = settings.healthCheck === undefined
    // The process's event-loop delay is measured from here on.
    const given = settings.readings
    this.source = given === undefined ? processReadings() : { read: given, stop () {} }
  }

  /** The first sample and the first health check, then the timers. */
  async start (): Promise<void> {
    if (this.settings.healthCheck !== undefined) await this.checkHealth()
    this.sample()
    this.timer = setTimeout(() => {
      this.sample()
      this.timer?.refresh()
    }, this.settings.sampleInterval).unref()
    const every = this.settings.healthCheckInterval
    if (every !== undefined) {
      const again = (): void => {
        void this.checkHealth().then(() => { if (!this.stopped) this.healthTimer?.refresh() })
      }
      this.healthTimer = setTimeout(again, every).unref()
    }
  }

  stop (): void {
    this.stopped = true
    clearTimeout(this.timer)
    clearTimeout(this.healthTimer)
    this.source.stop()
  }

  /** The health check's answer: the latest, when younger than `sampleInterval`; else a run's (shared). */
  async health (): Promise<unknown> {
    if (performance.now() - this.answeredAt < this.settings.sampleInterval) return this.answer
    return await this.checkHealth()
  }

  /** Runs the health check, or joins the run under way: a falsy answer, a throw or a rejection is unhealthy; resolves with what it answered. */
  checkHealth (): Promise<unknown> {
    if (this.running === undefined) {
      this.running = this.runHealth().finally(() => { this.running = undefined })
    }
    return this.running
  }

  private async runHealth (): Promise<unknown> {
    let answer: unknown
    try {
      answer = await this.settings.healthCheck!(this.fastify)
      this.healthCalls.worked()
    } catch (error) {
      this.healthCalls.failed(error)
      answer = false
    }
    this.answer = answer
    this.answeredAt = performance.now()
    const healthy = Boolean(answer)
    if (healthy !== this.healthy) {
      this.healthy = healthy
      this.decide()
    }
    return answer
  }

  /**
   * Reads the signals once; a source that throws keeps the previous readings, and says so. A
   * reading that is `NaN` is no reading: that signal keeps its previous value (0 before the first),
   * so no verdict comes from a sample that measured nothing.
   */
  sample (): void {
    try {
      this.readings = kept(this.readings, this.source.read())
      this.readingCalls.worked()
    } catch (error) {
      this.readingCalls.failed(error)
    }
    this.decide()
  }

  private decide (): void {
    const over = signalOver(this.readings, this.settings.limits, this.healthy)
    if (over === this.over) return
    const was = this.over
    this.over = over
    if (over === undefined) {
      this.log.info(`fastify-admission: no longer under pressure (${String(was)} back within its limit)`)
    } else {
      const value = over === 'healthCheck' ? 'failed' : `${this.readings[over]} > ${this.settings.limits[over]}`
      this.log.warn({ signal: over }, `fastify-admission: under pressure (${over} ${value}); gated requests are answered 503 with Retry-After: ${this.settings.retryAfter}`)
    }
    this.changed()
  }
}
