import { ceilDiv, floorDiv } from './arithmetic.js'
import { chargedOutcome } from './charge.js'
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

// A count above the limit is a charge's debt: each window that ends repays `limit` of it, so the
// next window starts with what is still owed (nothing, without a debt).
function roll (state: FixedWindowState, now: number, limit: number, windowMs: number): FixedWindowState {
  const current = windowStart(now, windowMs)
  if (current <= state.start) return state
  const windows = (current - state.start) / windowMs
  return { start: current, count: Math.max(0, state.count - windows * limit) }
}

// Windows until a count is repaid below `below`: the least n >= 1 with count - n * limit < below.
function windowsUntilBelow (count: number, below: number, limit: number): number {
  return Math.max(1, floorDiv(count - below, limit) + 1)
}

// A counter is back at full capacity once its windows have ended (one, or more with a debt); an
// empty one already is (from its own start on: before it, a clock that stepped back would still
// count into it).
function recovers (state: FixedWindowState, limit: number, windowMs: number): number {
  return state.count > 0 ? state.start + ceilDiv(state.count, limit) * windowMs : state.start
}

function fresh (policy: Policy, now: number): FixedWindowState {
  return { start: windowStart(now, policy.windowMs), count: 0 }
}

function consume (state: FixedWindowState, policy: Policy, now: number, cost: number): Outcome<FixedWindowState> {
  const { limit, windowMs } = policy
  // Roll forward only: a clock that stepped back keeps counting into the stored window (a live
  // counter is never reset).
  const rolled = roll(state, now, limit, windowMs)
  const allowed = rolled.count + cost <= limit
  const next: FixedWindowState = allowed ? { start: rolled.start, count: rolled.count + cost } : rolled
  return {
    allowed,
    remaining: Math.max(0, limit - next.count),
    // Denied: the first window whose count (what is still owed) leaves room for the cost; the
    // next one without a debt.
    retryAfterMs: allowed ? 0 : next.start + windowsUntilBelow(next.count, limit - cost + 1, limit) * windowMs - now,
    // An empty counter is full now, also on a clock that stepped back before its window.
    resetAt: next.count === 0 ? now : recovers(next, limit, windowMs),
    // Nothing comes back before a window ends; more once what is owed falls below the limit.
    moreAt: next.count === 0 ? now : next.start + windowsUntilBelow(next.count, limit, limit) * windowMs,
    state: next
  }
}

// A charge counts into the live window: up to one window of debt beyond the limit (2 * limit),
// back down to 0 (units returned never reach a window that is gone).
function charge (state: FixedWindowState, policy: Policy, now: number, units: number): Outcome<FixedWindowState> {
  const rolled = roll(state, now, policy.limit, policy.windowMs)
  const moved = rolled.count + units
  const count = units > 0 ? Math.max(rolled.count, Math.min(moved, 2 * policy.limit)) : Math.max(0, moved)
  return chargedOutcome(fixedWindow, { start: rolled.start, count }, policy, now)
}

function recoversAt (state: FixedWindowState, policy: Policy): number {
  return recovers(state, policy.limit, policy.windowMs)
}

function write (state: FixedWindowState, row: Float64Array, base: number): void {
  row[base] = state.start
  row[base + 1] = state.count
}

function read (row: Float64Array, base: number): FixedWindowState {
  return { start: row[base] as number, count: row[base + 1] as number }
}

export const fixedWindow: Kernel<FixedWindowState> = { fields: 2, fresh, consume, charge, recoversAt, write, read }
