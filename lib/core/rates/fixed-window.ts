import type { Kernel, Outcome, Policy } from './types.js'

/** A fixed window's state: `count` cost units consumed in the window that starts at `start`. */
export interface FixedWindowState {
  readonly start: number
  readonly count: number
}

// Windows are aligned to multiples of windowMs.
function windowStart (now: number, windowMs: number): number {
  return Math.floor(now / windowMs) * windowMs
}

// A counter is back at full capacity once its window has ended; an empty one already is (from
// its own start on: before it, a clock that stepped back would still count into it).
function recovers (state: FixedWindowState, windowMs: number): number {
  return state.count > 0 ? state.start + windowMs : state.start
}

function fresh (policy: Policy, now: number): FixedWindowState {
  return { start: windowStart(now, policy.windowMs), count: 0 }
}

function consume (state: FixedWindowState, policy: Policy, now: number, cost: number): Outcome<FixedWindowState> {
  const { limit, windowMs } = policy
  // Roll forward only: a clock that stepped back keeps counting into the stored window (a live
  // counter is never reset).
  const current = windowStart(now, windowMs)
  const rolled: FixedWindowState = current > state.start ? { start: current, count: 0 } : state
  const allowed = rolled.count + cost <= limit
  const next: FixedWindowState = allowed ? { start: rolled.start, count: rolled.count + cost } : rolled
  return {
    allowed,
    remaining: limit - next.count,
    // Denied: the next window admits any cost <= limit.
    retryAfterMs: allowed ? 0 : next.start + windowMs - now,
    resetAt: Math.max(now, recovers(next, windowMs)),
    // Nothing comes back before the window ends, then all of it.
    moreAt: next.count === 0 ? now : next.start + windowMs,
    state: next
  }
}

function recoversAt (state: FixedWindowState, policy: Policy): number {
  return recovers(state, policy.windowMs)
}

function write (state: FixedWindowState, row: Float64Array, base: number): void {
  row[base] = state.start
  row[base + 1] = state.count
}

function read (row: Float64Array, base: number): FixedWindowState {
  return { start: row[base] as number, count: row[base + 1] as number }
}

export const fixedWindow: Kernel<FixedWindowState> = { fields: 2, fresh, consume, recoversAt, write, read }
