import type { Policy } from './types.js'

/**
 * Leases for hot keys: a process takes a batch of units from the shared quota in one decision and
 * admits from it locally, giving back what it did not use when the lease ends. These are the rules
 * (pure: times in, numbers out); `lib/backends/redis/lease-book.ts` applies them.
 *
 * What a lease may do to the quota's promise. The batch is consumed from the quota when it is
 * taken, so the quota never hands out more units than its policy allows; what changes is when they
 * are used: up to `holdMs` after they were counted.
 * - Windows (fixed, sliding counter): a lease ends with the window it was counted in, and what it
 *   gives back is refused by the quota once that window is over, so every window admits at most
 *   its limit, exactly as without leases (a window's count is a sum: units given back within it
 *   are as if never taken).
 * - Token bucket and GCRA: a unit counted at t is used by t + holdMs, so over any T ms the
 *   admissions stay within what the policy allows over T + holdMs: at most capacity + limit ×
 *   (T + holdMs) / windowMs, the exact bound stretched by one hold. Their unused units are not
 *   given back: a bucket never holds more than its capacity, and a token taken out and returned
 *   later would have escaped that cap meanwhile (a token banked).
 * The price is the other way: units a process holds are not available to the others until its
 * lease ends (at most `holdMs`; a bucket's unused ones are lost), so a client may be refused by one
 * process while another holds units for it; a refusal always comes from the quota itself, whose
 * wait is never early.
 */

/**
 * The units to ask for: `batch`, never less than the request's `cost`, never more than a quarter
 * of what the quota had left after the last lease (`remaining`), so that leases shrink as the quota
 * runs down and its last units go one decision at a time, whatever the number of processes. A
 * result equal to `cost` means no lease: an ordinary decision.
 */
export function leaseUnits (batch: number, cost: number, remaining: number): number {
  return Math.max(cost, Math.min(batch, Math.floor(remaining / 4)))
}

/**
 * The batch after a lease ended. Spent within half its hold: the key asks for more than one lease
 * per half hold in this process, twice the units (at most `maxUnits`). Ended by time with more than
 * half unused: half (at least 1, where the next is an ordinary decision). Otherwise unchanged.
 */
export function nextBatch (batch: number, spent: boolean, heldMs: number, unused: number, holdMs: number, maxUnits: number): number {
  if (spent) return heldMs * 2 < holdMs ? Math.min(maxUnits, batch * 2) : batch
  return unused * 2 > batch ? Math.max(1, Math.floor(batch / 2)) : batch
}

/** The end of the window that `now` falls in (windows are aligned to multiples of windowMs). */
function windowEnd (now: number, windowMs: number): number {
  return (Math.floor(now / windowMs) + 1) * windowMs
}

function isWindow (policy: Policy): boolean {
  return policy.algorithm === 'fixed-window' || policy.algorithm === 'sliding-window-counter'
}

/**
 * On the quota's clock, the end of a lease taken when that clock read `now`: `holdMs` later, and
 * for a window no later than the window's end.
 */
export function leaseEndsAt (policy: Policy, now: number, holdMs: number): number {
  const held = now + holdMs
  return isWindow(policy) ? Math.min(held, windowEnd(now, policy.windowMs)) : held
}

/**
 * The quota time from which a lease taken at `now` may no longer give units back: a window's
 * units belong to their window (given back in the next one they would be a gift to it); a
 * bucket's never go back (-Infinity), see above.
 */
export function returnDeadline (policy: Policy, now: number): number {
  return isWindow(policy) ? windowEnd(now, policy.windowMs) : -Infinity
}
