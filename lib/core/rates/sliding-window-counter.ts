import { ceilDiv, floorDiv } from './arithmetic.js'
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

// The state at `now`: the window moves forward only. One window on, the current count becomes the
// previous one; further on, both are gone. A clock that stepped back keeps the stored window.
function roll (state: SlidingWindowCounterState, now: number, windowMs: number): SlidingWindowCounterState {
  const start = windowStart(now, windowMs)
  if (start <= state.start) return state
  if (start === state.start + windowMs) return { start, previous: state.current, current: 0 }
  return { start, previous: 0, current: 0 }
}

// Back at full capacity (the estimate is 0) once both counts have slid out of the window: two
// windows on when the current window has a count, one window on when only the previous has.
function recovers (state: SlidingWindowCounterState, windowMs: number): number {
  if (state.current > 0) return state.start + 2 * windowMs
  if (state.previous > 0) return state.start + windowMs
  return state.start
}

function fresh (policy: Policy, now: number): SlidingWindowCounterState {
  return { start: windowStart(now, policy.windowMs), previous: 0, current: 0 }
}

function consume (state: SlidingWindowCounterState, policy: Policy, now: number, cost: number): Outcome<SlidingWindowCounterState> {
  const { limit, windowMs: W } = policy
  const s = roll(state, now, W)
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
    resetAt: Math.max(now, recovers(next, W)),
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
  // c + cost > limit: not in this window. In the next one, with previous' = c (> 0, since
  // cost <= limit) and current' = 0, at elapsed e' once c * (W - e') + cost * W <= limit * W,
  // i.e. e' >= ceil(-room * W / c). That is W exactly when cost = limit: the start of the
  // window after, where both counts are gone.
  return untilNext + ceilDiv(-room * W, c)
}
function recoversAt (state: SlidingWindowCounterState, policy: Policy): number {
  return recovers(state, policy.windowMs)
}

function write (state: SlidingWindowCounterState, row: Float64Array, base: number): void {
  row[base] = state.start
  row[base + 1] = state.previous
  row[base + 2] = state.current
}

function read (row: Float64Array, base: number): SlidingWindowCounterState {
  return { start: row[base] as number, previous: row[base + 1] as number, current: row[base + 2] as number }
}

export const slidingWindowCounter: Kernel<SlidingWindowCounterState> = { fields: 3, fresh, consume, recoversAt, write, read }
