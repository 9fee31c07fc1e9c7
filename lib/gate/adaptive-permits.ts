import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { adaptiveSample, adaptiveTick, newAdaptiveLimit, type AdaptiveLimit, type AdaptiveLimitOptions } from '../core/adaptive/limit.js'
import { ABORTED, HELD_SLOT, Permits, RUNNING } from './permits.js'
import type { GateCounters } from './stats.js'

/** A window is at least this long, ms, and holds at least this many samples. */
export const WINDOW_MIN_MS = 5
export const WINDOW_MIN_SAMPLES = 3

/** A monotonic clock, ms (a double): `performance.now` unless a test passes its own. */
export type Clock = () => number

/**
 * The permits of a gate whose global limit is the core's adaptive limit. The one extra work per
 * request is in `onResponse`, and only for a response that completed normally: written, with a
 * status below 500, by a request that held a global slot, was not aborted and is not followed past
 * a handler timeout. Refused requests gave their permit back before any response, aborted ones
 * never reach `onResponse` (or reach it unwritten, on HTTP/2), opted-out routes have no hook:
 * none of them is a sample. A 5xx is not one either: a failure's latency (a crash answers at
 * once, a timeout late) says nothing of the work's.
 *
 * The latency is Fastify's own `reply.elapsedTime`: Fastify reads the clock when the request
 * starts and when its response finishes, for every route with an `onResponse` hook (every gated
 * route), so the sample needs no clock read of its own at the start. The completion time the
 * controller needs (its probes are timed) is one read of `clock` per sample.
 *
 * A probe that no sample would end (no traffic) is ended by a one-shot timer, armed only while a
 * probe runs, unref'd, and cleared by `stop()` (the plugin's `onClose`).
 */
export class AdaptivePermits extends Permits {
  private state: AdaptiveLimit
  private readonly options: AdaptiveLimitOptions
  private readonly clock: Clock
  private timer: NodeJS.Timeout | undefined = undefined
  // The current sample window (see `sample`).
  private windowStart = 0
  private windowCount = 0
  private windowSum = 0
  private windowInFlight = 0
  private stopped = false

  constructor (fastify: FastifyInstance, global: GateCounters, options: AdaptiveLimitOptions, reserveShare: number, clock: Clock = () => performance.now()) {
    const state = newAdaptiveLimit(options, clock())
    super(fastify, global, state.limit, reserveShare)
    this.state = state
    this.options = options
    this.clock = clock
  }

  /** The controller's state now (for stats and tests). */
  get adaptive (): AdaptiveLimit {
    return this.state
  }

  /**
   * Seconds until a slot is likely free: one measured round trip (the fast RTT), rounded up to
   * whole seconds from whole milliseconds, at least 1 — every in-flight request has turned over by then.
   */
  override retryAfter (): number {
    return Math.max(1, Math.ceil(Math.ceil(this.state.fast) / 1000))
  }

  override responded (request: FastifyRequest, reply: FastifyReply): void {
    const permit = this.permitOf(request)
    if (permit !== null && (permit.flags & HELD_SLOT) !== 0 && (permit.flags & (ABORTED | RUNNING)) === 0 &&
      reply.raw.writableEnded && reply.statusCode < 500) {
      this.sample(reply.elapsedTime)
    }
    super.responded(request, reply)
  }

  /**
   * One completed request's latency, ms, with the in-flight count it completed at. Samples are
   * gathered into a window of one round trip (the fast RTT; at least WINDOW_MIN_MS and
   * WINDOW_MIN_SAMPLES), and the controller sees one sample per window: the window's mean RTT and
   * mean in-flight count (the highest let the limit creep to three times the in-flight count at
   * 0.8 C on a spike or two per window, and a slowdown then met a queue of that size). Capping the
   * window at twice the no-load RTT, to answer a slowdown faster, took the limit to its floor (6)
   * within the step's 10 s, below the pool it protects, until a probe: one round trip it is. Fed every response, the controller would grow the limit by its step many times before
   * the first response admitted under the new limit came back (measured on the downstream model:
   * it overshot to 60-80 then collapsed to 6, five times a second); once per round trip is the
   * cadence of congestion control (Vegas, Gradient2's windows), where each update sees the
   * latency of the limit it set.
   */
  sample (rtt: number): void {
    const now = this.clock()
    const inFlight = this.global.inFlight
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
    const wasProbing = this.state.probing
    this.state = next
    if (next.limit !== this.limit) this.setLimit(next.limit)
    if (next.probing !== wasProbing) {
      if (next.probing) this.arm()
      else this.disarm()
    }
  }

  // Ends a probe with no samples: fires at the probe's longest (probeMaxMs, or three fast RTTs).
  private arm (): void {
    if (this.stopped) return
    const wait = Math.max(this.options.probeMaxMs, 3 * this.state.fast) - (this.clock() - this.state.probeStart)
    this.timer = setTimeout(() => { this.tick() }, Math.max(1, Math.ceil(wait)))
    this.timer.unref()
  }

  private disarm (): void {
    clearTimeout(this.timer)
    this.timer = undefined
  }

  /** The timer's work: end an overdue probe; one still running (its longest grew) re-arms. */
  tick (): void {
    this.timer = undefined
    this.update(adaptiveTick(this.state, this.clock(), this.options))
    if (this.state.probing) this.arm()
  }

  override stop (): void {
    this.stopped = true
    this.disarm()
  }
}
