import { ceilDiv, floorDiv } from './arithmetic.js'
import { chargedOutcome } from './charge.js'
import type { Kernel, Outcome, Policy } from './types.js'

/**
 * GCRA's state: one number per identity, the theoretical arrival time `tat`, in scaled time units
 * (`gcraScale(policy)` units per millisecond).
 */
export interface GcraState {
  readonly tat: number
}

function gcd (a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b]
  return a
}

/**
 * The time scale s = limit / gcd(limit, windowMs) (scaled units per millisecond), chosen so that
 * the emission interval T = windowMs / limit ms is a whole number of units:
 * T = windowMs / gcd(limit, windowMs).
 *
 * Every time the kernel handles is now * s plus at most a few burst * T, so a policy is only valid
 * when s * 4_102_444_800_000 (2100-01-01 in epoch ms) stays <= Number.MAX_SAFE_INTEGER, with room
 * for 2 * burst * T on top. This kernel does not check that: the policy validator enforces it.
 */
export function gcraScale (policy: Pick<Policy, 'limit' | 'windowMs'>): number {
  return policy.limit / gcd(policy.limit, policy.windowMs)
}

function fresh (policy: Policy, now: number): GcraState {
  return { tat: now * gcraScale(policy) }
}

function consume (state: GcraState, policy: Policy, now: number, cost: number): Outcome<GcraState> {
  const g = gcd(policy.limit, policy.windowMs)
  const s = policy.limit / g
  const T = policy.windowMs / g
  const tau = (policy.burst ?? policy.limit) * T
  const t = now * s
  // An identity at full capacity has tat <= now; a clock that stepped back never lowers tat.
  const tat0 = Math.max(state.tat, t)
  const newTat = tat0 + cost * T
  const allowed = newTat - t <= tau
  // A denial happens only with tat > now (a full identity admits any cost <= burst), so
  // storing tat0 stores the state unchanged.
  const next: GcraState = { tat: allowed ? newTat : tat0 }
  // Whole cost-1 units: the largest k with next.tat + k * T - t <= tau.
  const remaining = Math.max(0, floorDiv(tau - (next.tat - t), T))
  return {
    allowed,
    remaining,
    // Admitted at now + w once tat + cost * T - (now + w) * s <= tau.
    retryAfterMs: allowed ? 0 : ceilDiv(newTat - tau - t, s),
    resetAt: Math.max(now, ceilDiv(next.tat, s)),
    // remaining + 1 units pass at now + w once next.tat + (remaining + 1) * T - (now + w) * s <= tau.
    moreAt: remaining * T >= tau ? now : ceilDiv(next.tat + (remaining + 1) * T - tau, s),
    state: next
  }
}

// A charge moves tat by units * T from max(tat, now): ahead at most 2 * tau (one capacity of
// debt beyond a full use, which the validator keeps safe), back no earlier than now; a charge never
// moves it back, even on a clock that stepped back.
function charge (state: GcraState, policy: Policy, now: number, units: number): Outcome<GcraState> {
  const g = gcd(policy.limit, policy.windowMs)
  const T = policy.windowMs / g
  const t = now * (policy.limit / g)
  const tat0 = Math.max(state.tat, t)
  const moved = tat0 + units * T
  const tat = units > 0 ? Math.max(tat0, Math.min(moved, t + 2 * (policy.burst ?? policy.limit) * T)) : Math.max(t, moved)
  return chargedOutcome(gcra, { tat }, policy, now)
}

function recoversAt (state: GcraState, policy: Policy): number {
  return ceilDiv(state.tat, gcraScale(policy))
}

function write (state: GcraState, row: Float64Array, base: number): void {
  row[base] = state.tat
}

function read (row: Float64Array, base: number): GcraState {
  return { tat: row[base] as number }
}

export const gcra: Kernel<GcraState> = { fields: 1, fresh, consume, charge, recoversAt, write, read }
