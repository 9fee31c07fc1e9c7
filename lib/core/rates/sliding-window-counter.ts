import { ceilDiv, floorDiv } from './arithmetic.js'
import { chargedOutcome } from './charge.js'
import type { Kernel, Outcome, Policy } from './types.js'

/**
 * A sliding window counter's state: cost units consumed in the aligned window that starts at
 * `start` (`current`) and in the window before it (`previous`).
 */
export interface SlidingWindowCounterState {
  readonly start: number
  readonly previous: number
  readonly current: number
}

// Windows are aligned to multiples of windowMs (W). At elapsed time e = now - start (0 <= e < W)
// the estimate is previous * (W - e) / W + current; everything below is that inequality multiplied
// by W, in integers. With previous, current and cost each <= limit (the kernel keeps them so, and
// cost <= limit is validated elsewhere), no intermediate value exceeds limit * W, which validation
// keeps a safe integer.

function windowStart (now: number, windowMs: number): number {
  return Math.floor(now / windowMs) * windowMs
}

// The state at `now`: the window moves forward only. A current count above the limit is a
// charge's debt, spread over the windows after it, `limit` each: n windows on, the previous window
// holds what the count put there (clamp(current - (n - 1) * limit, 0, limit)) and the current one
// what is still owed (max(0, current - n * limit)). Without a debt that is: one window on, the
// current count becomes the previous one; further on, both are gone. A clock that stepped back
// keeps the stored window.
function roll (state: SlidingWindowCounterState, now: number, limit: number, windowMs: number): SlidingWindowCounterState {
  const start = windowStart(now, windowMs)
  if (start <= state.start) return state
  const n = (start - state.start) / windowMs
  const c = state.current
  return { start, previous: Math.min(limit, Math.max(0, c - (n - 1) * limit)), current: Math.max(0, c - n * limit) }
}

// Back at full capacity (the estimate is 0) once both counts have slid out of the window: with a
// current count, one window after the last window it spreads over (ceil(current / limit) of
// them: one without a debt); with only a previous one, one window on.
function recovers (state: SlidingWindowCounterState, limit: number, windowMs: number): number {
  if (state.current > 0) return state.start + (ceilDiv(state.current, limit) + 1) * windowMs
  if (state.previous > 0) return state.start + windowMs
  return state.start
}

function fresh (policy: Policy, now: number): SlidingWindowCounterState {
  return { start: windowStart(now, policy.windowMs), previous: 0, current: 0 }
}

function consume (state: SlidingWindowCounterState, policy: Policy, now: number, cost: number): Outcome<SlidingWindowCounterState> {
  const { limit, windowMs: W } = policy
  const s = roll(state, now, limit, W)
  const { start, previous: p, current: c } = s
  // Elapsed time in the window. A clock that stepped back before the stored window counts as its
  // first tick, where the estimate is highest: never lower than at any time already seen.
  const e = Math.max(0, now - start)
  // Admit iff p * (W - e) + (c + cost) * W <= limit * W, i.e. p * (W - e) <= room * W.
  const room = limit - c - cost
  const allowed = p * (W - e) <= room * W
  const next: SlidingWindowCounterState = allowed ? { start, previous: p, current: c + cost } : s
  // Whole cost-1 units left: the largest k with p * (W - e) + (current + k) * W <= limit * W.
  const remaining = Math.max(0, limit - ceilDiv(p * (W - e), W) - next.current)
  return {
    allowed,
    remaining,
    retryAfterMs: allowed ? 0 : waitFor(start, p, c, cost, now, limit, W),
    // Both counts empty: full now, also on a clock that stepped back before the window.
    resetAt: next.previous === 0 && next.current === 0 ? now : Math.max(now, recovers(next, limit, W)),
    // remaining + 1 more units than the state after it holds; none when it is full.
    moreAt: remaining === limit ? now : now + waitFor(start, p, next.current, remaining + 1, now, limit, W),
    state: next
  }
}

/**
 * The least wait after which `cost` more units pass, nothing else consumed, for a state rolled to
 * `now` (window `start`, counts p and c) that cannot take them now. The estimate only falls with
 * time, so it is closed form. `untilNext` is the wait until the next window starts (it includes the
 * gap of a clock that stepped back before `start`, during which the estimate stays at its e = 0 value).
 */
function waitFor (start: number, p: number, c: number, cost: number, now: number, limit: number, W: number): number {
  const untilNext = start + W - now
  const room = limit - c - cost
  if (room >= 0) {
    // c + cost fits in a window: still in this window, as soon as the previous window's share
    // has decayed to p * (W - e') <= room * W, i.e. W - e' <= floor(room * W / p); p > 0
    // here, or the cost would have passed. floor(...) = 0 gives the next window's start,
    // where the estimate is (c + cost) * W <= limit * W.
    return untilNext - floorDiv(room * W, p)
  }
  // c + cost > limit: not in this window. k windows on (roll), the counts are
  // p_k = clamp(c - (k - 1) * limit, 0, limit) and c_k = max(0, c - k * limit); the first window
  // where c_k + cost fits is k = ceil((c + cost - limit) / limit) (>= 1), and in it the cost passes
  // at elapsed e' once p_k * (W - e') <= room_k * W: at W - floor(room_k * W / p_k), or its start
  // when that is negative (W itself is the start of the window after, where p = c_k fits). p_k > 0:
  // c > (k - 1) * limit, since cost <= limit.
  const k = ceilDiv(-room, limit)
  const pk = Math.min(limit, c - (k - 1) * limit)
  const roomK = limit - Math.max(0, c - k * limit) - cost
  const e = Math.max(0, W - floorDiv(roomK * W, pk))
  return untilNext + (k - 1) * W + e
}

// A charge counts into the live window's current count: up to one window of debt beyond the
// limit (2 * limit), back down to 0 (units returned never reach a window that is gone).
function charge (state: SlidingWindowCounterState, policy: Policy, now: number, units: number): Outcome<SlidingWindowCounterState> {
  const s = roll(state, now, policy.limit, policy.windowMs)
  const moved = s.current + units
  const current = units > 0 ? Math.max(s.current, Math.min(moved, 2 * policy.limit)) : Math.max(0, moved)
  return chargedOutcome(slidingWindowCounter, { start: s.start, previous: s.previous, current }, policy, now)
}

function recoversAt (state: SlidingWindowCounterState, policy: Policy): number {
  return recovers(state, policy.limit, policy.windowMs)
}

function write (state: SlidingWindowCounterState, row: Float64Array, base: number): void {
  row[base] = state.start
  row[base + 1] = state.previous
  row[base + 2] = state.current
}

function read (row: Float64Array, base: number): SlidingWindowCounterState {
  return { start: row[base] as number, previous: row[base + 1] as number, current: row[base + 2] as number }
}

export const slidingWindowCounter: Kernel<SlidingWindowCounterState> = { fields: 3, fresh, consume, charge, recoversAt, write, read }
