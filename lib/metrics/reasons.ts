import type { ShedReason } from '../pressure/pressure.js'

/**
 * Why the gate refused a request: which step refused it, by a name of a bounded set — fixed names,
 * and names made of what the options declare (a policy's name, a pressure signal's), never of
 * anything a request carries. docs/guides/metrics.md#reasons lists them.
 */
export type Reason =
  | 'in-flight' | 'route-in-flight' | 'fleet-in-flight' | 'client-in-flight'
  | 'long-lived' | 'route-long-lived'
  | 'retry-reserve' | 'route-retry-reserve'
  | 'queue-delay' | `pressure:${string}`
  | `quota:${string}` | `penalty:${string}` | 'login-failures'
  | 'backend-unavailable'

/**
 * Refusals by reason, of one gate. Every reason its plan can refuse for is there from the start
 * (at 0), so that a reporter shows the whole set before the first refusal.
 */
export type ReasonCounts = Map<Reason, number>

export function countReason (counts: ReasonCounts, reason: Reason): void {
  counts.set(reason, (counts.get(reason) ?? 0) + 1)
}

/** The reasons a gate's plan can refuse for, each at 0 unless counted already. */
export function expectReasons (counts: ReasonCounts, reasons: Iterable<Reason>): void {
  for (const reason of reasons) if (!counts.has(reason)) counts.set(reason, 0)
}

/** Several gates' refusals by reason added up, as a plain object in the order of the names. */
export function reasonRecord (all: Iterable<ReasonCounts>): Record<string, number> {
  const sum = new Map<string, number>()
  for (const counts of all) for (const [reason, count] of counts) sum.set(reason, (sum.get(reason) ?? 0) + count)
  return Object.fromEntries([...sum].sort(([a], [b]) => (a < b ? -1 : 1)))
}

/** The reason of a pressure shed: the signal over its limit (`pressure:` and its name), or queueing delay. */
export const SHED_REASONS: Readonly<Record<ShedReason, Reason>> = Object.freeze({
  eventLoopDelay: 'pressure:eventLoopDelay',
  heapUsedBytes: 'pressure:heapUsedBytes',
  rssBytes: 'pressure:rssBytes',
  healthCheck: 'pressure:healthCheck',
  eventLoopUtilization: 'pressure:eventLoopUtilization',
  queueDelay: 'queue-delay'
})

/** The reason of a quota's refusal: its policy by name, or that policy's penalty when it has one. */
export function quotaReason (policy: string, penalty: boolean): Reason {
  return penalty ? `penalty:${policy}` : `quota:${policy}`
}
