import { adaptiveSample, adaptiveTick, adaptiveTickAt, newAdaptiveLimit, type AdaptiveLimit, type AdaptiveLimitOptions } from '../../core/adaptive/limit.js'
import type { PermitEnd } from './permit-record.js'
import type { SlotHolder } from './slot-links.js'
import { HELD_SLOT, type Slots } from './slots.js'

/** A window is at least this long, ms, and holds at least this many samples. */
export const WINDOW_MIN_MS = 5
export const WINDOW_MIN_SAMPLES = 3

/** A monotonic clock, ms (a double): `performance.now` unless a test passes its own. */
export type Clock = () => number

/**
 * The adaptive in-flight limit's ears: it listens to permits as they end and moves the slots'
 * limit L to the core's adaptive limit. A sample is a permit that ended `responded` — written,
 * not aborted, not answered by a handler timeout — with a status below 500, holding a global
 * slot: refused requests never held one, aborted ones say nothing of the work's latency, and a
 * failure's latency (a crash answers at once, a timeout late) says nothing either.
 *
 * The latency is Fastify's own `reply.elapsedTime` (Fastify reads the clock when the request
 * starts and when its response finishes, for every route with an `onResponse` hook — every gated
 * one), so a sample needs no clock read of its own at the start. Samples are gathered into a
 * window of one round trip (the fast RTT; at least WINDOW_MIN_MS and WINDOW_MIN_SAMPLES), and the
 * controller sees one sample per window, its mean RTT and mean in-flight count: once per round
 * trip is the cadence of congestion control (Vegas, Gradient2), where each update sees the
 * latency of the limit it set; fed every response, the limit would grow many times before the
 * first response admitted under it came back.
 *
 * What no sample would do is done by one one-shot timer, unref'd, cleared by `stop()` (the
 * plugin's `onClose`), set for the core's `adaptiveTickAt`: the end of a probe (with no traffic no
 * sample ends it), or idleMs after the limit was last in use (the core then starts afresh, so that
 * a limit a flood of cheap answers ratcheted down does not meet the next burst). The timer is set
 * when a window closes and none is set, or when the next change comes sooner (a probe started);
 * a deadline that moved later (the limit was used meanwhile) is found when the timer fires, which
 * sets it again. So a busy server wakes about once per idleMs, and an idle one, once fresh, never.
 *
 * With the queue-delay probe beside it (`'auto'`), a permit that ends while the event loop has a
 * standing queue (`loopQueued`) is no sample: its elapsed time holds its wait for the loop (to be
 * read, to have its timers and its response's write run), which the in-flight limit cannot shorten
 * — fewer requests in flight downstream leave the loop as busy — and which the queue-delay cut
 * sheds for. Read as downstream queueing, it would cut the limit below what the downstream serves
 * (a connection storm at start-up took it from 40 to 13 under a 16-connection pool).
 */
export class AdaptiveSampler {
  private state: AdaptiveLimit
  private readonly options: AdaptiveLimitOptions
  private readonly slots: Slots
  private readonly clock: Clock
  private timer: NodeJS.Timeout | undefined
  /** When the timer fires, on the clock; Infinity when none is set, -Infinity once stopped (none ever is). */
  private timerAt: number
  private windowStart: number
  private windowCount: number
  private windowSum: number
  private windowInFlight: number

  constructor (slots: Slots, options: AdaptiveLimitOptions, clock: Clock = () => performance.now(), loopQueued?: () => boolean) {
    const sampled = this.sampled
    this.ended = loopQueued === undefined ? sampled : (permit, how) => { if (!loopQueued()) sampled(permit, how) }
    this.state = newAdaptiveLimit(options, clock())
    this.options = options
    this.slots = slots
    this.clock = clock
    this.timer = undefined
    this.timerAt = Number.POSITIVE_INFINITY
    this.windowStart = 0
    this.windowCount = 0
    this.windowSum = 0
    this.windowInFlight = 0
    slots.setLimit(this.state.limit)
    slots.retryAfter = this.retryAfter()
  }

  /** The controller's state now (for stats and tests). */
  get adaptive (): AdaptiveLimit {
    return this.state
  }

  /** A permit's end: a sample when it ended as a completed request (and the loop had no standing queue, when asked). */
  readonly ended: (permit: SlotHolder, how: PermitEnd) => void

  private readonly sampled = (permit: SlotHolder, how: PermitEnd): void => {
    if (how === 'responded' && (permit.held & HELD_SLOT) !== 0 && permit.reply.statusCode < 500) this.sample(permit.reply.elapsedTime)
  }

  /**
   * Seconds until a slot is likely free: one measured round trip (the fast RTT), rounded up to
   * whole seconds from whole milliseconds, at least 1 — every in-flight request has turned over by then.
   */
  private retryAfter (): number {
    return Math.max(1, Math.ceil(Math.ceil(this.state.fast) / 1000))
  }

  /** One completed request's latency, ms, with the in-flight count it completed at. */
  sample (rtt: number): void {
    const now = this.clock()
    // The permit being sampled still holds its slot: the count it completed at.
    const inFlight = this.slots.global.inFlight
    if (this.windowCount === 0) {
      this.windowStart = now
      this.windowSum = 0
      this.windowInFlight = 0
    }
    this.windowCount++
    this.windowSum += rtt
    this.windowInFlight += inFlight
    if (this.windowCount < WINDOW_MIN_SAMPLES || now - this.windowStart < Math.max(WINDOW_MIN_MS, this.state.fast)) return
    const count = this.windowCount
    this.windowCount = 0
    this.update(adaptiveSample(this.state, { rtt: this.windowSum / count, inflight: this.windowInFlight / count, now }, this.options))
  }

  private update (next: AdaptiveLimit): void {
    this.state = next
    if (next.limit !== this.slots.ownLimit) this.slots.setLimit(next.limit)
    this.slots.retryAfter = this.retryAfter()
    const at = adaptiveTickAt(next, this.options)
    if (at < this.timerAt) this.arm(at)
  }

  // The timer, for the core's next change at `at` (a finite time, sooner than any set).
  private arm (at: number): void {
    clearTimeout(this.timer)
    this.timerAt = at
    this.timer = setTimeout(() => { this.tick() }, Math.max(1, Math.ceil(at - this.clock())))
    this.timer.unref()
  }

  /**
   * The timer's work: the core's tick, with the count in flight now (a full gate with no samples is
   * a hang, not idleness). A change still to come — a probe whose longest grew, an idle time that
   * restarted when the limit was used — sets the timer again.
   */
  private tick (): void {
    this.timer = undefined
    this.timerAt = Number.POSITIVE_INFINITY
    const before = this.state
    this.update(adaptiveTick(before, this.clock(), this.options, this.slots.global.inFlight))
    // Started afresh: an open window's samples belong to the traffic that was.
    if (this.state.baseline === 0 && before.baseline !== 0) this.windowCount = 0
  }

  stop (): void {
    clearTimeout(this.timer)
    this.timer = undefined
    this.timerAt = Number.NEGATIVE_INFINITY
  }
}
