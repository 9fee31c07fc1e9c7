import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { adaptiveSample, adaptiveTick, newAdaptiveLimit, type AdaptiveLimit, type AdaptiveLimitOptions } from '../core/adaptive/limit.js'
import { ABORTED, HELD_SLOT, Permits, RUNNING } from './permits.js'
import type { GateCounters } from './stats.js'

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

  /** One completed request's latency, ms, sampled with the in-flight count it completed at. */
  sample (rtt: number): void {
    const before = this.state
    this.update(adaptiveSample(before, { rtt, inflight: this.global.inFlight, now: this.clock() }, this.options))
    if (!before.probing && this.state.probing) this.arm()
  }

  private update (next: AdaptiveLimit): void {
    this.state = next
    if (next.limit !== this.limit) this.setLimit(next.limit)
  }

  // Ends a probe with no samples: fires at the probe's longest (probeMaxMs, or three fast RTTs).
  private arm (): void {
    if (this.timer !== undefined || this.stopped) return
    const wait = Math.max(this.options.probeMaxMs, 3 * this.state.fast) - (this.clock() - this.state.probeStart)
    this.timer = setTimeout(() => { this.tick() }, Math.max(1, Math.ceil(wait)))
    this.timer.unref()
  }

  /** The timer's work: end an overdue probe; one still running (its longest grew) re-arms. */
  tick (): void {
    this.timer = undefined
    this.update(adaptiveTick(this.state, this.clock(), this.options))
    if (this.state.probing) this.arm()
  }

  override stop (): void {
    this.stopped = true
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
  }
}
