import { performance } from 'node:perf_hooks'
import { codelSample, codelShare, newCodel, type Codel } from '../core/index.js'
import type { QueueDelaySettings } from './options.js'

/**
 * The queueing delay of the event loop, measured as a timer's lateness, fed into the pure CoDel
 * controller (`lib/core/adaptive/codel.ts`). Why a timer and not each request's age: Node does not
 * tell when a request's bytes arrived (they wait in the socket's kernel buffer, where the work of
 * a CPU-bound server queues), so the age seen in `onRequest` would start at the parse and miss the
 * wait. A timer due at `t` that runs at `t + d` was held back by `d` ms of other work: a request
 * whose bytes arrived at `t` waited about as long before the loop came to it. One timer, unref'd,
 * every `intervalMs / 10` ms (10 ms by default), so that an interval holds about ten samples.
 *
 * The request hook reads `codel.shed` (0 when not shedding): nothing else per request.
 */
export class DelayProbe {
  codel: Codel = newCodel()
  /** The latest lateness measured, ms. */
  delayMs = 0
  readonly periodMs: number
  private readonly settings: QueueDelaySettings
  private readonly clock: () => number
  private readonly changed: () => void
  private timer: NodeJS.Timeout | undefined
  private due = 0

  /** `changed` runs after a sample starts or stops shedding, or changes the share. */
  constructor (settings: QueueDelaySettings, changed: () => void) {
    this.settings = settings
    this.clock = settings.clock ?? (() => performance.now())
    this.changed = changed
    this.periodMs = Math.max(1, Math.floor(settings.codel.intervalMs / 10))
  }

  start (): void {
    this.due = this.clock() + this.periodMs
    this.timer = setTimeout(() => {
      this.tick()
      this.timer?.refresh()
    }, this.periodMs).unref()
  }

  stop (): void {
    clearTimeout(this.timer)
  }

  /** One sample: how late this tick is, into the controller. */
  tick (): void {
    const now = this.clock()
    // A clock that steps back (a fake one) measures no delay.
    this.delayMs = Math.max(0, now - this.due)
    this.due = now + this.periodMs
    const before = this.codel.shed
    this.codel = codelSample(this.codel, { delay: this.delayMs, now }, this.settings.codel)
    if (this.codel.shed !== before) this.changed()
  }

  /** The share shed now, in [0, 1]. */
  get share (): number {
    return codelShare(this.codel)
  }
}
