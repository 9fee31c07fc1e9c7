import type { Policy } from '../core/rates/types.js'
import type { BackendLimiter, SynchronousDecisions } from '../rates/backend.js'
import { policyHeader, quotaOf, rateLimitStart } from './headers.js'
import type { FailureCount } from './failures.js'
import { StackedQuota } from './stacked-quota.js'
import type { FastifyRequest } from 'fastify'
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
  /** `RateLimit`'s start, with the policy's name in the headers (`default`, or its tier's name). */
  readonly rateLimitStart: string
  /** `q` of that header: `RateLimit`'s `r` never exceeds it. */
  readonly quota: number
  readonly cost: number
  /** The route has a handler timeout: its permit waits for the handler, not for the response. */
  readonly waitsForHandler: boolean
  /** Its priority at the global in-flight gate. */
  readonly priority: Priority
  /** A stack of policies (the limiter is it): the `RateLimit` headers list each. */
  readonly stacked: StackedQuota | undefined
  /** Tiers: the rate check picks one of these gates per request (each with its quota, headers and counters). */
  tiers: TierChoice | undefined
  /** Login throttling: only failed responses take from the quota. */
  failures: FailureCount | undefined
  /** A backend failure was logged and no decision has succeeded since: stay quiet. */
  failing: boolean
}

/** A tiered route's tiers: `tier(request)` names one of `gates`. */
export interface TierChoice {
  readonly tier: (request: FastifyRequest) => string
  readonly gates: ReadonlyMap<string, RouteGate>
}

export function routeGate (name: string, maxInFlight: number | false, limiter: BackendLimiter | undefined, policy: Readonly<Policy> | false | undefined,
  cost: number, headers: boolean, waitsForHandler: boolean, priority: Priority = NORMAL, headerName = 'default'): RouteGate {
  const limited = limiter !== undefined && policy !== undefined && policy !== false
  const stacked = limiter instanceof StackedQuota ? limiter : undefined
  return {
    name,
    counters: newCounters(),
    maxInFlight: maxInFlight === false ? 0 : maxInFlight,
    limiter,
    synchronous: limiter?.synchronous,
    policy: limited ? policy : undefined,
    policyHeader: limited && headers ? stacked === undefined ? policyHeader(policy, headerName) : stacked.policyHeader() : undefined,
    rateLimitStart: rateLimitStart(headerName),
    quota: limited ? quotaOf(policy).quota : 0,
    stacked,
    tiers: undefined,
    failures: undefined,
    cost,
    waitsForHandler,
    priority,
    failing: false
  }
}
