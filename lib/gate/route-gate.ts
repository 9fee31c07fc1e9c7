import type { Policy } from '../core/rates/types.js'
import type { CountedGate, GateCounters } from '../metrics/counters.js'
import { newCounters } from '../metrics/counters.js'
import { quotaReason, type Reason } from '../metrics/reasons.js'
import type { BackendLimiter, SynchronousStack, Verdicts } from '../rates/backend.js'
import { policyHeader, quotaOf, rateLimitStart } from './headers/rate-limit-fields.js'
import type { FastifyReply, FastifyRequest } from 'fastify'

/** What a registration knows of one route (or of one tier of it, or of the requests that matched none). */
export interface RouteGate extends CountedGate {
  /** `METHOD /url`, as `stats().routes` and the logs name it. */
  readonly name: string
  readonly counters: GateCounters
  /** The route's own in-flight limit, or 0 for none. */
  readonly maxInFlight: number
  /** At most this many of the route's long-lived connections at once, 0 for no bound of the route's own. */
  maxLongLived: number
  /** The route's permits holding its slots, oldest first (a list through `Permit.newer`): the age of its oldest. */
  oldest: HeldPermit | null
  newest: HeldPermit | null
  /** The client's quota, or undefined for no rate limit. */
  readonly limiter: BackendLimiter | undefined
  /**
   * Why its quota refuses, per policy in the order of `policyNames`: the policy by name, or its
   * penalty; none for a gate that decides no quota itself (a tiered route's own: its tiers do).
   */
  readonly quotaReasons: readonly Reason[]
  /** The policy asked for (headers and logs use it, never what a backend reports). */
  readonly policy: Readonly<Policy> | undefined
  /** The `RateLimit-Policy` value, or undefined when headers are off or there is no limit. */
  readonly policyHeader: string | undefined
  /** `RateLimit`'s start, with the policy's name (`default`, or its tier's name). */
  readonly rateLimitStart: string
  /** `q` of that header: `RateLimit`'s `r` never exceeds it. */
  readonly quota: number
  readonly cost: number
  /** A stack of policies (the limiter is it): the `RateLimit` fields list each. */
  readonly stacked: StackQuota | undefined
  /** A backend failure was logged and no decision has succeeded since: stay quiet. */
  failing: boolean
}

/** A stack of policies as a gate decides on it and reports it (the quotas' `StackedQuota`). */
export interface StackQuota extends BackendLimiter {
  readonly stack: { readonly policies: readonly Readonly<Policy>[] }
  /** Each policy's name, quota (`q`) and start of its `RateLimit` item, in the stack's order. */
  readonly names: readonly string[]
  readonly quotas: readonly number[]
  readonly starts: readonly string[]
  /** Its verdicts and numbers on the request's path, when the stack decides synchronously (memory). */
  readonly verdicts: Verdicts | undefined
  readonly sync: SynchronousStack | undefined
}

/** A permit as its route's list of held permits sees it. */
export interface HeldPermit {
  readonly request: FastifyRequest
  readonly reply: FastifyReply
  older: HeldPermit | null
  newer: HeldPermit | null
  /** Held past the warning threshold, and logged. */
  warned: boolean
}

/**
 * `url`: the route's template (undefined for the requests that matched none); `tiers`: a tiered
 * route's tier names, which its own gate reports as its policies.
 */
export function routeGate ({ name, url, maxInFlight = false, limiter, policy, cost = 1, headers = false, headerName = 'default', tiers, stacked }: {
  readonly name: string
  readonly url?: string | undefined
  readonly maxInFlight?: number | false
  readonly limiter?: BackendLimiter | undefined
  readonly policy?: Readonly<Policy> | false | undefined
  readonly cost?: number
  readonly headers?: boolean
  /** The name its `RateLimit` items carry (a tier's gate: the tier's). */
  readonly headerName?: string
  /** A tiered route's own gate: its policies are the tiers. */
  readonly tiers?: readonly string[] | undefined
  /** The limiter, when it is a stack of policies. */
  readonly stacked?: StackQuota | undefined
}): RouteGate {
  const limited = limiter !== undefined && policy !== undefined && policy !== false
  // A stack's policies have no penalty (a stack refuses as one).
  const quotaReasons = !limited || tiers !== undefined ? [] : stacked === undefined ? [quotaReason(headerName, policy.penalty !== undefined)] : stacked.names.map((one) => quotaReason(one, false))
  return {
    name,
    url,
    policyNames: limited ? Object.freeze([...(tiers ?? stacked?.names ?? [headerName])]) : [],
    quotaReasons: Object.freeze(quotaReasons),
    counters: newCounters(),
    reasons: new Map(),
    maxInFlight: maxInFlight === false ? 0 : maxInFlight,
    maxLongLived: 0,
    oldest: null,
    newest: null,
    limiter,
    policy: limited ? policy : undefined,
    policyHeader: limited && headers ? stacked === undefined ? policyHeader(policy, [headerName], cost) : policyHeader(stacked.stack.policies, stacked.names, cost) : undefined,
    rateLimitStart: rateLimitStart(headerName),
    quota: limited ? quotaOf(policy).quota : 0,
    stacked,
    cost,
    failing: false
  }
}
