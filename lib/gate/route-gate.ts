import type { Policy } from '../core/rates/types.js'
import type { BackendLimiter, SynchronousDecisions } from '../rates/backend.js'
import { policyHeader, quotaOf } from './headers.js'
import { NORMAL, type Priority } from './priority.js'
import { newCounters, type GateCounters } from './stats.js'

/** What a registration knows of one route (or of the requests that matched none). */
export interface RouteGate {
  /** `METHOD /url`, as `stats().routes` and the logs name it. */
  readonly name: string
  readonly counters: GateCounters
  /** The route's own in-flight limit, or 0 for none. */
  readonly maxInFlight: number
  /** The client's quota, or undefined for no rate limit. */
  readonly limiter: BackendLimiter | undefined
  /** The quota's synchronous decisions, when its backend has them (memory): no promise. */
  readonly synchronous: SynchronousDecisions | undefined
  /** The policy asked for (headers and logs use it, never what a backend reports). */
  readonly policy: Readonly<Policy> | undefined
  /** The `RateLimit-Policy` value, or undefined when headers are off or there is no limit. */
  readonly policyHeader: string | undefined
  /** `q` of that header: `RateLimit`'s `r` never exceeds it. */
  readonly quota: number
  readonly cost: number
  /** The route has a handler timeout: its permit waits for the handler, not for the response. */
  readonly waitsForHandler: boolean
  /** Its priority at the global in-flight gate. */
  readonly priority: Priority
  /** A backend failure was logged and no decision has succeeded since: stay quiet. */
  failing: boolean
}

export function routeGate (name: string, maxInFlight: number | false, limiter: BackendLimiter | undefined, policy: Readonly<Policy> | false | undefined,
  cost: number, headers: boolean, waitsForHandler: boolean, priority: Priority = NORMAL): RouteGate {
  const limited = limiter !== undefined && policy !== undefined && policy !== false
  return {
    name,
    counters: newCounters(),
    maxInFlight: maxInFlight === false ? 0 : maxInFlight,
    limiter,
    synchronous: limiter?.synchronous,
    policy: limited ? policy : undefined,
    policyHeader: limited && headers ? policyHeader(policy) : undefined,
    quota: limited ? quotaOf(policy).quota : 0,
    cost,
    waitsForHandler,
    priority,
    failing: false
  }
}
