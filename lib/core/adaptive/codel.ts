/**
 * A queueing-delay shedder in the spirit of CoDel (Nichols and Jacobson, "Controlling Queue Delay",
 * ACM Queue 2012; RFC 8289), for work that queues in the event loop rather than in flight
 * (synchronous CPU: in-flight never exceeds one or two, so an in-flight limit sees nothing).
 * Pure: state as a value, samples and time passed in; no randomness.
 *
 * Inputs are delay samples with their time (ms, doubles): event-loop delay measured periodically,
 * or each request's queueing delay. As in CoDel, a delay above `targetMs` is tolerated as long as it
 * does not last a whole `intervalMs`: a burst that the server absorbs sheds nothing. Once every
 * sample for an interval has been above target, shedding starts, and it stops at the first sample
 * at or below target. A server at full utilization whose delay stays at or under target therefore
 * sheds nothing, whatever its load.
 *
 * While shedding, CoDel's control law sets the pace: after step k (count = k) the next step is due
 * `intervalMs / sqrt(k)` later. CoDel drops one packet per step, which is enough for TCP (a flow
 * halves its rate on a loss); one shed HTTP request removes only itself, so here a step raises the
 * shed share instead:
 *
 *     share = min(maxShare, step * sqrt(count))
 *
 * which is CoDel's drop rate, sqrt(count) / interval, as a share of a steady arrival rate. The share
 * grows about linearly in time: with the defaults 0.1 at once, 0.5 about 0.85 s later, 0.9 after
 * 1.65 s. Shedding that starts again soon after an episode resumes at count - 2, near the share that
 * was last needed, instead of from 1 (the 2012 pseudocode); "soon" is within 16 intervals of the
 * last step, as in RFC 8289 and Linux (the pseudocode's one interval would almost never apply here,
 * since shedding restarts only after a whole interval above target). Once the share is at
 * `maxShare` the count stops growing, so one call does a bounded amount of work, however long
 * the gap since the previous sample: at most (maxShare / step)^2 steps.
 *
 * Leaving the shedding state at the first sample at or below target is CoDel's; the cost, under an
 * overload that continues, is a cycle: each restart waits an interval, while the backlog grows by
 * (overload - 1) * intervalMs of delay. A smaller interval shortens it (the test measures the
 * shares and delays on a synthetic CPU-bound server).
 *
 * The share is kept as an integer out of `SHED_SCALE` (1024); `codelSheds` turns it into a
 * deterministic decision for a request counter: of every 1024 consecutive counter values (aligned),
 * exactly `shed` are refused, spread evenly (a Bresenham line), so no pseudo-random input is needed.
 * A caller that prefers a probability reads `codelShare`.
 *
 * Options are the caller's to validate (see `CodelOptions` for the ranges).
 */

/** The shed share's denominator: `shed` is out of 1024. */
export const SHED_SCALE = 1024

/** The shedder's parameters, validated by the caller against the ranges below. */
export interface CodelOptions {
  /** The delay that may be exceeded only briefly, ms: > 0. Default 5. */
  readonly targetMs: number
  /** How long the delay may stay above target before shedding starts, ms: > 0. Default 100. */
  readonly intervalMs: number
  /** The share shed at the first step (count 1): in (0, 1]. Default 0.1. */
  readonly step: number
  /** The highest share shed: in [1 / 1024, 1]. Default 0.9, so that some requests still get through. */
  readonly maxShare: number
}

/** The shedder's state as a value. */
export interface Codel {
  /** Whether the last sample was above target, and since when samples have been (ms). */
  readonly above: boolean
  readonly aboveSince: number
  /** Whether it is shedding. */
  readonly shedding: boolean
  /** The control law's step count, and when its next step is due (ms); kept after shedding stops. */
  readonly count: number
  readonly nextAt: number
  /** The share to shed now, out of SHED_SCALE: an integer in [0, 1024]; 0 when not shedding. */
  readonly shed: number
}

/** One delay measurement. */
export interface DelaySample {
  /** The delay, ms. */
  readonly delay: number
  /** When it was measured, ms (monotonic). */
  readonly now: number
}

const defaults: CodelOptions = Object.freeze({ targetMs: 5, intervalMs: 100, step: 0.1, maxShare: 0.9 })

/** The defaults, with `overrides` on top (an undefined override keeps the default); frozen. */
export function codelOptions (overrides: Partial<CodelOptions> = {}): CodelOptions {
  const merged: Record<string, unknown> = { ...defaults }
  for (const [key, value] of Object.entries(overrides)) if (value !== undefined) merged[key] = value
  return Object.freeze(merged) as unknown as CodelOptions
}

/** A fresh state: no delay seen, nothing shed. */
export function newCodel (): Codel {
  return { above: false, aboveSince: 0, shedding: false, count: 0, nextAt: 0, shed: 0 }
}

function shedOf (count: number, options: CodelOptions): number {
  return Math.min(Math.floor(options.maxShare * SHED_SCALE), Math.ceil(options.step * Math.sqrt(count) * SHED_SCALE))
}

/** The state after one delay sample. */
export function codelSample (state: Codel, sample: DelaySample, options: CodelOptions): Codel {
  const { delay, now } = sample
  const { intervalMs } = options
  if (delay <= options.targetMs) {
    return state.above || state.shedding ? { ...state, above: false, shedding: false, shed: 0 } : state
  }
  const aboveSince = state.above ? state.aboveSince : now
  if (!state.shedding) {
    if (now - aboveSince < intervalMs) return { ...state, above: true, aboveSince }
    // Shedding starts; soon after the last episode, near where it ended.
    const count = state.count > 2 && now - state.nextAt < 16 * intervalMs ? state.count - 2 : 1
    return { above: true, aboveSince, shedding: true, count, nextAt: now + intervalMs / Math.sqrt(count), shed: shedOf(count, options) }
  }
  let { count, nextAt } = state
  const most = Math.floor(options.maxShare * SHED_SCALE)
  // Every step due by now; once the share is at its cap the count stops (it is what a later episode
  // resumes from) and the schedule just moves on, so a long gap between samples costs no extra loop.
  while (now >= nextAt && shedOf(count, options) < most) {
    count++
    nextAt += intervalMs / Math.sqrt(count)
  }
  if (now >= nextAt) nextAt = now + intervalMs / Math.sqrt(count)
  return { above: true, aboveSince, shedding: true, count, nextAt, shed: shedOf(count, options) }
}

/** The share to shed now, in [0, 1]. */
export function codelShare (state: Codel): number {
  return state.shed / SHED_SCALE
}

/**
 * Whether to shed the request numbered `counter` (a non-negative integer the caller increments per
 * request; it may wrap at any multiple of 1024). Exactly `shed` of every 1024 aligned consecutive
 * counters are shed, evenly spread: a Bresenham line of slope shed / 1024.
 */
export function codelSheds (state: Codel, counter: number): boolean {
  const r = counter % SHED_SCALE
  return Math.floor(((r + 1) * state.shed) / SHED_SCALE) > Math.floor((r * state.shed) / SHED_SCALE)
}
