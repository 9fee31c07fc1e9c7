import type { Policy } from '../../core/rates/types.js'
import { quotaOf } from '../../rates/policy.js'

export { quotaOf }
import type { PolicyOutcome, RateDecision } from '../../rates/decision.js'
import type { FastifyReply } from 'fastify'
import { LIST_SEPARATOR, MAX_INTEGER, serializeInteger, serializeItem, serializeItemStarts, serializeList, type Parameter } from './structured-fields.js'


/**
 * `RateLimit-Policy` (draft 11): `"<name>";q=<quota>;w=<seconds>` for each policy, named `default`
 * unless a tier or a stack names it. `q` and `r` count cost units: a route whose request takes
 * `cost` > 1 of them says so in `admission-cost` (a vendor parameter, as the draft asks of
 * implementation-specific ones: `qu` takes only the registry's units, and a cost unit is none of them).
 */
export function policyHeader (policies: Policy | readonly Policy[], names: readonly string[] = ['default'], cost = 1): string {
  const list = Array.isArray(policies) ? policies as readonly Policy[] : [policies as Policy]
  return serializeList(list.map((policy, i) => {
    const { quota, windowSeconds } = quotaOf(policy)
    const parameters: Parameter[] = [['q', quota], ['w', windowSeconds]]
    if (cost !== 1) parameters.push(['admission-cost', cost])
    return [names[i]!, parameters] as const
  }))
}

/**
 * `RateLimit` after a decision (draft 11): `r`, the cost-1 units left (clamped to 0..quota,
 * whatever a custom backend reports), and `t`, the whole seconds until more than `r` units are
 * available, rounded up (never early) — absent at full capacity, where no more comes. On a
 * refusal (`retrySeconds`, its `Retry-After`) `t` is never beyond it: a decision's own `moreAt`
 * never is, and a custom backend's `resetAt` standing in for one is cut to it (both stay late
 * enough: the unit that comes first comes no later than the cost that was refused).
 */
export function rateLimitHeader (remaining: number, quota: number, moreAt: number, now: number, start = DEFAULT_START, retrySeconds = NO_REFUSAL): string {
  const r = clampRemaining(remaining, quota)
  if (r === quota) return start + fieldInteger(r)
  const t = secondsUntil(moreAt, now)
  return start + fieldInteger(r) + T + fieldInteger(t < retrySeconds ? t : retrySeconds)
}

/** `r` and `t`, counts and seconds: what `serializeInteger` writes, its checks (and its error) for anything else. */
function fieldInteger (n: number): string {
  return n >= 0 && n <= MAX_INTEGER && Number.isInteger(n) ? String(n) : serializeInteger(n)
}
const NO_REFUSAL = Number.POSITIVE_INFINITY

/** `RateLimit` of a stack: one item per policy, in the stack's order; `t` of a refusing policy within `retrySeconds`. */
export function rateLimitList (starts: readonly string[], quotas: readonly number[], remaining: ArrayLike<number>, moreAt: ArrayLike<number>, now: number, refused?: ArrayLike<boolean>, retrySeconds = NO_REFUSAL): string {
  let value = ''
  for (let i = 0; i < starts.length; i++) {
    value += (i === 0 ? '' : LIST_SEPARATOR) + rateLimitHeader(remaining[i]!, quotas[i]!, moreAt[i]!, now, starts[i], refused?.[i] === true ? retrySeconds : NO_REFUSAL)
  }
  return value
}

/** Whole seconds from `now` to `at`, rounded up, never below 0. */
function secondsUntil (at: number, now: number): number {
  return Math.ceil(Math.max(0, at - now) / 1000)
}

/** The start of `RateLimit`'s value for a policy named `name`, made once per route: `"<name>";r=`. */
export function rateLimitStart (name: string): string {
  return serializeItemStarts(name, [], ['r'])[0]!
}
const DEFAULT_START = rateLimitStart('default')
const T = serializeItemStarts('default', [], ['r', 't'])[1]!

/** The name of the in-flight limit's policy: the registration's (`in-flight`), the route's own (`route-in-flight`), a client's (`client-in-flight`). */
export type InFlightPolicyName = 'in-flight' | 'route-in-flight' | 'long-lived' | 'route-long-lived' | 'client-in-flight'

/**
 * The in-flight limit as a quota policy, on the 503 of a full gate: `q` requests at once, in the
 * draft's `concurrent-requests` unit (no window: a slot comes back when a request ends), and
 * `RateLimit` with none left. `t` is left out: when a slot frees is not known; `Retry-After` says
 * when to try again.
 */
export function inFlightFields (name: InFlightPolicyName, limit: number): { policy: string, rateLimit: string } {
  return {
    policy: serializeList([[name, [['q', limit], ['qu', 'concurrent-requests']]]]),
    rateLimit: serializeItem(name, [['r', 0]])
  }
}

/** `r`: the units left, within 0..quota whatever a custom backend reports. */
export function clampRemaining (remaining: number, quota: number): number {
  return remaining > quota ? quota : remaining > 0 ? remaining : 0
}

/** When more quota comes: the decision's `moreAt`, or its `resetAt` (later, never early) from a custom backend that does not say. */
export function moreAtOf (decision: RateDecision | PolicyOutcome): number {
  const moreAt = decision.moreAt
  return Number.isSafeInteger(moreAt) ? moreAt! : decision.resetAt
}

/** What a browser's code needs to read of the gate's answer in the default format: when to come back, and what is left. */
const EXPOSED = ['Retry-After', 'RateLimit', 'RateLimit-Policy'] as const

/** Makes a reply readable by a page of another origin (`browserExposure`). */
export type Expose = (reply: FastifyReply) => void

/**
 * A cross-origin response (it carries `Access-Control-Allow-Origin`, from @fastify/cors or the
 * application) exposes `Retry-After` and the rate-limit fields (`names`, those of the formats the
 * registration sends) to the page's code: a browser hides every response header but a few unless
 * `Access-Control-Expose-Headers` names it. Names already exposed stay, once each; `*` already
 * exposes them to a request without credentials.
 */
export function browserExposure (names: readonly string[]): Expose {
  const joined = names.join(', ')
  return (reply) => {
    if (allowedOrigin(reply) === undefined) return
    const current = reply.getHeader('access-control-expose-headers')
    if (current === undefined) {
      reply.header('access-control-expose-headers', joined)
      return
    }
    const list = Array.isArray(current) ? current.join(', ') : String(current)
    const have = new Set(list.split(',').map((name) => name.trim().toLowerCase()))
    if (have.has('*') && reply.getHeader('access-control-allow-credentials') !== 'true') return
    const missing = names.filter((name) => !have.has(name.toLowerCase()))
    if (missing.length !== 0) reply.header('access-control-expose-headers', `${list}, ${missing.join(', ')}`)
  }
}

/** The default format's exposure (draft 11's two fields and `Retry-After`). */
export const exposeToBrowsers: Expose = browserExposure(EXPOSED)

// Fastify keeps the headers set on a reply (`reply.header()`, as @fastify/cors sets them) in an object
// under its symbol `fastify.reply.headers`: read there, the check costs a property load on every
// admission with fields, where `reply.getHeader()` lowercases the name twice and asks Node's
// response too. Found on the first reply; a reply without it (another copy of Fastify) is asked
// through `getHeader`, as is a header set on the raw response.
let kReplyHeaders: symbol | undefined

/** The reply's header object, where Fastify keeps what `reply.header()` sets; undefined on a reply without one. */
function replyHeaders (reply: FastifyReply): Record<string, unknown> | undefined {
  kReplyHeaders ??= Object.getOwnPropertySymbols(reply).find((symbol) => symbol.description === 'fastify.reply.headers')
  return kReplyHeaders === undefined ? undefined : (reply as unknown as Record<symbol, Record<string, unknown> | undefined>)[kReplyHeaders]
}

/** The reply's `Access-Control-Allow-Origin`, or undefined. */
export function allowedOrigin (reply: FastifyReply): unknown {
  const headers = replyHeaders(reply)
  if (headers === undefined) return reply.getHeader('access-control-allow-origin')
  return headers['access-control-allow-origin'] ?? reply.raw.getHeader('access-control-allow-origin')
}

/**
 * Sets `RateLimit-Policy` and, unless undefined, `RateLimit` on an admission, as `reply.header()`
 * would: for these names (lowercase already, neither `set-cookie`) it stores the value under the
 * name in the reply's header object, which is what it does after lowercasing the name — two
 * lowercasings an admission need not pay. A reply without that object is set through `header()`.
 */
export function setFields (reply: FastifyReply, policy: string, rateLimit: string | undefined): void {
  const headers = replyHeaders(reply)
  if (headers === undefined) {
    reply.header('ratelimit-policy', policy)
    if (rateLimit !== undefined) reply.header('ratelimit', rateLimit)
    return
  }
  headers['ratelimit-policy'] = policy
  if (rateLimit !== undefined) headers.ratelimit = rateLimit
}
