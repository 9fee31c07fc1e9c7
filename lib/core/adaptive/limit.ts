/**
 * An adaptive in-flight limit, in the family of Netflix concurrency-limits' Gradient2 and Vegas
 * limits, with the probing of BBR's ProbeRTT (Cardwell et al., "BBR: Congestion-Based Congestion
 * Control", ACM Queue 2016). Pure: state as a value, time and samples passed in.
 *
 * A sample is one completed request: its round-trip time `rtt` (ms, a double), the in-flight count
 * when it started (itself included) and the time it completed `now` (ms, a double, monotonic:
 * the caller reads its monotonic clock and passes the value in; a clock that steps back only delays a probe).
 *
 * Per sample, outside a probe:
 *
 *     fast     = fast + fastWeight * (rtt - fast)              // short-term RTT, a fast EWMA
 *     baseline = min(baseline, fast)                           // falls at once, never rises here
 *     gradient = clamp(tolerance * baseline / fast, 0.5, 1)    // 1: no queueing seen
 *     target   = estimate * gradient + queueSize               // queueSize: ceil(sqrt(estimate)) by default
 *     estimate = clamp(estimate * (1 - smoothing) + target * smoothing, min, max)
 *     limit    = floor(estimate)
 *
 * which is Gradient2's update (its tolerance, smoothing, sqrt queue size and 0.5 floor on the
 * gradient), except for the baseline, where Gradient2 and Vegas each go wrong:
 *
 * - Gradient2's baseline is a slow EWMA of every RTT. Under sustained modest overload the RTTs it
 *   averages include the queueing, so it drifts up to the current RTT, the gradient returns to 1 and
 *   the limit creeps up by `queueSize` per sample, to `max` (the test runs both side by side). Here
 *   no loaded sample moves the baseline up: it only falls, to the fast RTT (an average, so one lucky
 *   sample cannot drag it to an unrealistically low value: the bias Gradient2's authors give for
 *   not using a minimum).
 * - A baseline that only falls is Vegas' `rtt_noload`, which stays at the old, fast value when the
 *   downstream becomes slower for good: every RTT then looks like queueing and the limit stays at
 *   its floor. Vegas every so often resets `rtt_noload` to the current (loaded) sample, which lets
 *   the queueing back into the baseline, so Gradient2's creep returns. Here, as in BBR's ProbeRTT,
 *   the baseline is re-measured: the limit drops to `probeRatio` of itself until `probeSamples`
 *   samples that started inside the probe, under the probe's limit, have completed (or `probeMaxMs`,
 *   and at least three fast RTTs, have passed); their mean RTT becomes the baseline, and the limit
 *   returns to its estimate before the probe. A downstream that became slower is measured as slower
 *   (the baseline rises, the limit grows back); a queue of our own making drains during the probe
 *   and is measured as what it is (the baseline stays: no creep).
 *
 * A probe starts when queueing is seen (gradient < 1) and the baseline has not been confirmed (a
 * fast RTT <= baseline) for `probeIntervalMs`: without queueing nothing needs re-measuring, so a
 * steady server, noisy or not, never probes. It also starts when the baseline has fallen by more
 * than the tolerance since it was last measured and the RTT stops falling: after a slowdown ends,
 * a baseline learnt from loaded samples is only an upper bound of the new no-load RTT. The
 * limit does not grow while the RTT falls, since the RTT at the current limit is not known yet.
 *
 * Growth counts only when the limit was in use (in-flight >= `utilization` * estimate: the
 * app-limited check of concurrency-limits, which skips samples below half the limit); a decrease
 * applies at any in-flight count, since a slower downstream is news even at low load.
 *
 * With the sqrt queue size, a downstream that stays slow holds the limit at the gradient's floor,
 * where 0.5 * L + ceil(sqrt(L)) = L (about 4 to 6), not at `min`, until a probe re-measures it.
 *
 * Idle recovery. Cuts apply at any in-flight count and growth only when the limit is in use, so
 * samples that never use the limit can only lower it: a flood of cheap answers (0.1 ms, a few in
 * flight) whose latency is mostly noise reads as queueing at every busy turn of the event loop and
 * ratchets the limit down to the gradient's floor, and nothing raises it again — no samples once
 * the load ends, or samples far below the limit. So when the limit has not been in use (a sample,
 * or a tick, at in-flight >= `utilization` * estimate) for `idleMs`, the state starts afresh, as
 * `newAdaptiveLimit` at that time: the RTTs are forgotten and learnt again from the next sample,
 * and the limit is the initial one — or the estimate, when that is higher. A low limit is the
 * trace of a queue, and an unused limit has none; what was learnt of the latency belongs to the
 * traffic that was (the flood's 0.1 ms would make ordinary requests look queued: a cut and a
 * probe at once); a higher limit was measured in use and is kept, so that a pause costs a busy
 * server nothing. A hang is no idleness: the stuck requests hold the limit in use at every tick.
 * Applied by `adaptiveTick` (the gate's timer, at `adaptiveTickAt`) or by the next sample that
 * does not use the limit, whichever comes first; never during a probe, but at its end when the
 * limit has gone unused for idleMs by then. A probe's end is no use: a flood that ended during one
 * would otherwise hold its low limit for up to probeMaxMs more. Use during a probe is a sample at
 * `utilization` of the probe's own limit, so a busy server's probe never reads as idleness.
 *
 * Options are the caller's to validate (see `AdaptiveLimitOptions` for the ranges); given valid
 * options and finite samples, `limit` is always an integer in [min, max] (a property test).
 */

/** The adaptive limit's parameters. All numbers, validated by the caller against the ranges below. */
export interface AdaptiveLimitOptions {
  /** The limit before any sample, clamped into [min, max]. Default 20. */
  readonly initial: number
  /** The lowest limit: a positive integer. Default 1. */
  readonly min: number
  /** The highest limit: an integer >= min. Default 1000. */
  readonly max: number
  /** How much slower than the baseline the fast RTT may be before it counts as queueing: >= 1. Default 1.5. */
  readonly tolerance: number
  /** The weight of a new estimate in the limit: in (0, 1]. Default 0.2. */
  readonly smoothing: number
  /** The weight of a new sample in the fast RTT: in (0, 1]. Default 0.1. */
  readonly fastWeight: number
  /** Growth per sample with no queueing, before smoothing: >= 0; 0 means ceil(sqrt(estimate)). Default 0. */
  readonly queueSize: number
  /** Growth counts only when a sample's in-flight count was at least this share of the limit: in [0, 1]. Default 0.5. */
  readonly utilization: number
  /** A probe starts when the baseline has not been confirmed for this long, ms: > 0. Default 2 000 (the step benchmark: at 10 000 a 4× slower downstream was served at 0.10 C instead of its 0.26 C for 9 s; at 2 000 the limit had the slowed capacity within a second). */
  readonly probeIntervalMs: number
  /** The limit during a probe as a share of the limit (never below min): in (0, 1). Default 0.5. */
  readonly probeRatio: number
  /** Samples started inside a probe that end it: a positive integer. Default 5. */
  readonly probeSamples: number
  /** The longest probe, ms (or three fast RTTs, when longer): > 0. Default 1000. */
  readonly probeMaxMs: number
  /** The state starts afresh once the limit has not been in use for this long, ms: > 0. Default 4 000 (twice the probe interval: a measurement that old would be re-taken anyway). */
  readonly idleMs: number
}

/** The adaptive limit's state as a value. */
export interface AdaptiveLimit {
  /** The limit to enforce now: an integer in [min, max] (the probe's limit during a probe). */
  readonly limit: number
  /** The smoothed limit, a double in [min, max]; `limit` is its floor outside a probe. */
  readonly estimate: number
  /** The no-load RTT estimate, ms; 0 until the first sample. */
  readonly baseline: number
  /** The short-term RTT (fast EWMA), ms; 0 until the first sample. */
  readonly fast: number
  /** The baseline as last measured (by a probe, or the first sample), ms; 0 until the first sample. */
  readonly measured: number
  /** When the baseline was last confirmed (fast RTT <= baseline) or re-measured, ms. */
  readonly confirmedAt: number
  /** Whether a probe is under way. */
  readonly probing: boolean
  /** When the current (or last) probe started, ms. */
  readonly probeStart: number
  /** Samples counted by the current probe, and the sum of their RTTs (ms). */
  readonly probeCount: number
  readonly probeSum: number
  /** When the limit was last in use (a sample or a tick at in-flight >= utilization * estimate, a probe's end), or the state was made, ms. */
  readonly usedAt: number
}

/** One completed request. */
export interface RttSample {
  /** Its round-trip time, ms (>= 0; below 1 µs counts as 1 µs). */
  readonly rtt: number
  /** The in-flight count when it started, itself included. */
  readonly inflight: number
  /** When it completed, ms, on the clock of `newAdaptiveLimit`'s `now`. */
  readonly now: number
}

/** The smallest RTT used, ms: a zero RTT (a coarse clock) would divide by zero. */
export const MIN_RTT_MS = 0.001

const defaults: AdaptiveLimitOptions = Object.freeze({
  initial: 20,
  min: 1,
  max: 1000,
  tolerance: 1.5,
  smoothing: 0.2,
  fastWeight: 0.1,
  queueSize: 0,
  utilization: 0.5,
  probeIntervalMs: 2_000,
  probeRatio: 0.5,
  probeSamples: 5,
  probeMaxMs: 1000,
  idleMs: 4_000
})

/** The defaults, with `overrides` on top (an undefined override keeps the default); frozen. */
export function adaptiveLimitOptions (overrides: Partial<AdaptiveLimitOptions> = {}): AdaptiveLimitOptions {
  const merged: Record<string, unknown> = { ...defaults }
  for (const [key, value] of Object.entries(overrides)) if (value !== undefined) merged[key] = value
  return Object.freeze(merged) as unknown as AdaptiveLimitOptions
}

/** A fresh state at time `now` (ms): the initial limit, no RTT seen yet. */
export function newAdaptiveLimit (options: AdaptiveLimitOptions, now: number): AdaptiveLimit {
  const estimate = Math.min(options.max, Math.max(options.min, options.initial))
  return {
    limit: Math.floor(estimate),
    estimate,
    baseline: 0,
    fast: 0,
    measured: 0,
    confirmedAt: now,
    probing: false,
    probeStart: now,
    probeCount: 0,
    probeSum: 0,
    usedAt: now
  }
}

/** Whether `inflight` requests use the limit: at least `utilization` of the estimate, and one at least. */
function inUse (inflight: number, estimate: number, options: AdaptiveLimitOptions): boolean {
  return inflight > 0 && inflight >= estimate * options.utilization
}

// Idle: not probing, something learnt (a fresh state has nothing to forget), and the limit unused
// for idleMs.
function idle (state: AdaptiveLimit, now: number, options: AdaptiveLimitOptions): boolean {
  return !state.probing && state.baseline !== 0 && now - state.usedAt >= options.idleMs
}

// A fresh state at `now`, keeping an estimate above the initial one (measured in use).
function recover (state: AdaptiveLimit, now: number, options: AdaptiveLimitOptions): AdaptiveLimit {
  const fresh = newAdaptiveLimit(options, now)
  return state.estimate > fresh.estimate ? { ...fresh, limit: Math.floor(state.estimate), estimate: state.estimate } : fresh
}

/** The limit during a probe: `probeRatio` of the current limit, never below `min`. */
function probeLimit (estimate: number, options: AdaptiveLimitOptions): number {
  return Math.max(options.min, Math.floor(Math.floor(estimate) * options.probeRatio))
}

// The end of a probe: the samples' mean RTT (if any) becomes the baseline, and the limit returns to
// the estimate it had before the probe. The fast RTT is kept (it is the RTT at that estimate, the
// probe's is not: starting it from the probe's would grow the limit past where it was), unless
// the probe measured more.
function endProbe (state: AdaptiveLimit, now: number): AdaptiveLimit {
  const measured = state.probeCount > 0
  const mean = measured ? state.probeSum / state.probeCount : state.baseline
  return {
    ...state,
    limit: Math.floor(state.estimate),
    baseline: mean,
    fast: Math.max(state.fast, mean),
    measured: mean,
    confirmedAt: now,
    probing: false
  }
}

// A probe lasts at most probeMaxMs, or three fast RTTs when that is longer: a request admitted at
// the probe's start must have time to complete, however slow the downstream.
function probeEnd (state: AdaptiveLimit, options: AdaptiveLimitOptions): number {
  return state.probeStart + Math.max(options.probeMaxMs, 3 * state.fast)
}

function overdue (state: AdaptiveLimit, now: number, options: AdaptiveLimitOptions): boolean {
  return now >= probeEnd(state, options)
}

/** The state after one completed request. */
export function adaptiveSample (state: AdaptiveLimit, sample: RttSample, options: AdaptiveLimitOptions): AdaptiveLimit {
  const rtt = Math.max(MIN_RTT_MS, sample.rtt)
  const { now, inflight } = sample
  const used = inUse(inflight, state.estimate, options)
  // Idle recovery when no tick applied it: only on a sample that does not use the limit either (one
  // that does, after a long gap, is the end of a hang: news about the limit, not a fresh start).
  if (!used && idle(state, now, options)) state = recover(state, now, options)

  if (state.probing) {
    // Only a request that started inside the probe and under its limit measures the drained system.
    const clean = now - rtt >= state.probeStart && inflight <= state.limit
    const usedAt = inUse(inflight, state.limit, options) ? Math.max(state.usedAt, now) : state.usedAt
    const next = clean ? { ...state, probeCount: state.probeCount + 1, probeSum: state.probeSum + rtt, usedAt } : { ...state, usedAt }
    return next.probeCount >= options.probeSamples || overdue(state, now, options) ? endProbe(next, now) : next
  }

  const usedAt = used ? Math.max(state.usedAt, now) : state.usedAt
  if (state.baseline === 0) return { ...state, baseline: rtt, fast: rtt, measured: rtt, confirmedAt: now, usedAt }

  const fast = state.fast + options.fastWeight * (rtt - state.fast)
  // Probe when queueing is seen (gradient < 1) and the baseline is old; or, when the baseline has
  // fallen by more than the tolerance since it was last measured (the downstream became faster, and
  // a baseline learnt from loaded samples is only an upper bound), as soon as the RTT stops falling.
  // Without queueing nothing needs re-measuring, so a steady server never probes.
  const fell = state.baseline * options.tolerance < state.measured
  const old = now - state.confirmedAt >= options.probeIntervalMs
  if ((fell && fast > state.baseline) || (old && fast > options.tolerance * state.baseline)) {
    return { ...state, fast, limit: probeLimit(state.estimate, options), probing: true, probeStart: now, probeCount: 0, probeSum: 0, usedAt }
  }
  const falling = fast < state.baseline
  const baseline = falling ? fast : state.baseline
  const confirmedAt = fast <= state.baseline ? now : state.confirmedAt

  const { estimate } = state
  const gradient = Math.max(0.5, Math.min(1, (options.tolerance * baseline) / fast))
  const queueSize = options.queueSize > 0 ? options.queueSize : Math.ceil(Math.sqrt(estimate))
  let next = estimate * (1 - options.smoothing) + (estimate * gradient + queueSize) * options.smoothing
  // No growth from a sample taken far below the limit (app-limited: it says nothing about a higher
  // limit), nor while the RTT is falling (the RTT at the current limit is not known yet: growing on
  // the way down would rebuild a queue before the baseline reaches the new no-load RTT).
  if (next > estimate && (falling || inflight < estimate * options.utilization)) next = estimate
  next = Math.min(options.max, Math.max(options.min, next))
  return { ...state, limit: Math.floor(next), estimate: next, baseline, fast, confirmedAt, usedAt }
}

/**
 * The state at time `now` with no sample, `inflight` requests in flight: ends a probe that is
 * overdue (with no traffic, no sample would); notes a limit in use (a hang: nothing completes);
 * starts afresh when the limit has not been in use for `idleMs`. Cheap; call it when a timer fires
 * (at `adaptiveTickAt`) or before reading `limit`. Nothing to do: the same state.
 */
export function adaptiveTick (state: AdaptiveLimit, now: number, options: AdaptiveLimitOptions, inflight: number): AdaptiveLimit {
  if (state.probing) {
    if (!overdue(state, now, options)) return state
    state = endProbe(state, now)
  }
  if (inUse(inflight, state.estimate, options)) return { ...state, usedAt: Math.max(state.usedAt, now) }
  return idle(state, now, options) ? recover(state, now, options) : state
}

/**
 * When `adaptiveTick` would next change the limit if no sample came, ms: a probe's end, or the
 * end of `idleMs` since the limit was last in use; Infinity when neither can happen (a fresh state).
 */
export function adaptiveTickAt (state: AdaptiveLimit, options: AdaptiveLimitOptions): number {
  if (state.probing) return probeEnd(state, options)
  return state.baseline === 0 ? Number.POSITIVE_INFINITY : state.usedAt + options.idleMs
}
