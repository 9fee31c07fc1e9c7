/**
 * A route's priority at the global in-flight gate (`config.admission.priority`). Under pressure the
 * lowest goes first, with the limit L and the reserve R = floor(criticalReserve * L):
 * - `sheddable` is admitted while fewer than L - R requests are in flight: it never takes the
 *   last R slots, so it is the first refused as the gate fills;
 * - `normal` (the default) while fewer than L are;
 * - `critical` while fewer than L are, or, at the limit, while fewer than R critical requests
 *   are (Netflix's partitions: the reserve is enforced only when the total is at its limit, so
 *   spare capacity is borrowed by every priority below it).
 * The numbers are what the permits compare on the request's path (a switch on a small integer).
 */
export const NORMAL = 0
export const CRITICAL = 1
export const SHEDDABLE = 2
export type Priority = typeof NORMAL | typeof CRITICAL | typeof SHEDDABLE

export const PRIORITY_NAMES = ['normal', 'critical', 'sheddable'] as const
export type PriorityName = typeof PRIORITY_NAMES[number]

/** The default share of the in-flight limit kept for `critical` routes. */
export const DEFAULT_CRITICAL_RESERVE = 0.2

/** The reserve R for a limit L: floor(share * L), so that L - R >= 1 for any share below 1. */
export function reserveOf (limit: number, share: number): number {
  return Math.floor(limit * share)
}
