import type { FastifyReply } from 'fastify'
import type { Policy } from '../../core/rates/types.js'
import { clampRemaining, quotaOf } from './rate-limit-fields.js'
import { serializeList } from './structured-fields.js'

/**
 * The header formats a registration may send (`headers: { format }`), each as its clients read it:
 * - `draft-11`: `RateLimit-Policy` and `RateLimit` of draft-ietf-httpapi-ratelimit-headers-11
 *   (names, `q`/`w`, `r`/`t`) — the default;
 * - `draft-7`: `RateLimit: limit=…, remaining=…, reset=…` and `RateLimit-Policy: <q>;w=<s>` of draft 07;
 * - `draft-6`: `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` and `RateLimit-Policy` of draft 06;
 * - `x-ratelimit`: `x-ratelimit-limit`, `-remaining` and `-reset`, @fastify/rate-limit's default names.
 */
export const HEADER_FORMATS = ['draft-11', 'draft-7', 'draft-6', 'x-ratelimit'] as const
export type HeaderFormat = typeof HEADER_FORMATS[number]

/** The names each format sends, as `Access-Control-Expose-Headers` lists them. */
const FIELDS: Readonly<Record<HeaderFormat, readonly string[]>> = {
  'draft-11': ['RateLimit', 'RateLimit-Policy'],
  'draft-7': ['RateLimit', 'RateLimit-Policy'],
  'draft-6': ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'RateLimit-Policy'],
  'x-ratelimit': ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset']
}

/** What a browser's code needs to read of the gate's answers in these formats: `Retry-After`, then each format's names, once. */
export function exposedNames (formats: readonly HeaderFormat[]): readonly string[] {
  return [...new Set(['Retry-After', ...formats.flatMap((format) => FIELDS[format])])]
}

/**
 * One quota's numbers as the older formats say them — the "expiring limit" (`limit`), what is left
 * of it (`remaining`) and the whole seconds until it resets (`reset`) — written on the reply.
 */
export type ExpiringLimit = (reply: FastifyReply, limit: number, remaining: number, reset: number) => void

const WRITERS: Readonly<Record<Exclude<HeaderFormat, 'draft-11'>, ExpiringLimit>> = {
  'draft-7': (reply, limit, remaining, reset) => {
    reply.header('ratelimit', `limit=${limit}, remaining=${remaining}, reset=${reset}`)
  },
  'draft-6': (reply, limit, remaining, reset) => {
    reply.header('ratelimit-limit', String(limit)).header('ratelimit-remaining', String(remaining)).header('ratelimit-reset', String(reset))
  },
  'x-ratelimit': (reply, limit, remaining, reset) => {
    reply.header('x-ratelimit-limit', String(limit)).header('x-ratelimit-remaining', String(remaining)).header('x-ratelimit-reset', String(reset))
  }
}

/**
 * The writer of the older formats among `formats` (every one, in one function), or undefined when
 * there are none: chosen once per registration, so that a request never asks which formats it sends.
 */
export function expiringLimitWriter (formats: readonly HeaderFormat[]): ExpiringLimit | undefined {
  const writers = formats.filter((format) => format !== 'draft-11').map((format) => WRITERS[format as Exclude<HeaderFormat, 'draft-11'>])
  if (writers.length === 0) return undefined
  if (writers.length === 1) return writers[0]
  return (reply, limit, remaining, reset) => {
    for (const write of writers) write(reply, limit, remaining, reset)
  }
}

/**
 * `RateLimit-Policy` of drafts 6 and 7: `<quota>;w=<seconds>` per policy (the quota and window draft
 * 11's `q` and `w` say), with `admission-cost` where a request takes more than one unit (a
 * vendor-prefixed parameter, as those drafts ask of their own). Undefined when draft 11 is sent
 * too: the two share the name, and draft 11's value (which names each policy) is the one kept.
 */
export function olderPolicyHeader (formats: readonly HeaderFormat[], policies: readonly Readonly<Policy>[], cost: number): string | undefined {
  if (formats.includes('draft-11') || !formats.some((format) => format === 'draft-6' || format === 'draft-7')) return undefined
  return serializeList(policies.map((policy) => {
    const { quota, windowSeconds } = quotaOf(policy)
    return [quota, cost === 1 ? [['w', windowSeconds]] : [['w', windowSeconds], ['admission-cost', cost]]] as const
  }))
}

/**
 * `reset`: on a refusal, the seconds of its `Retry-After` (the drafts ask both to name the same
 * moment); otherwise the whole seconds, rounded up, until the quota is back at full capacity
 * (`resetAt`) — never before the client may come back, never a promise of more than there is.
 */
export function resetSeconds (resetAt: number, now: number, retrySeconds: number | undefined): number {
  return retrySeconds ?? Math.ceil(Math.max(0, resetAt - now) / 1000)
}

/**
 * Which of a stack's policies the older formats describe: the one with the least left (the drafts'
 * "closest to reaching its limit"), the later reset among equals. On a refusal that is one of the
 * policies that refused (each has less than the cost left; every other has at least the cost).
 */
export function expiringIndex (quotas: readonly number[], remaining: ArrayLike<number>, resetAt: ArrayLike<number>): number {
  let chosen = 0
  let least = clampRemaining(remaining[0]!, quotas[0]!)
  for (let i = 1; i < quotas.length; i++) {
    const left = clampRemaining(remaining[i]!, quotas[i]!)
    if (left < least || (left === least && resetAt[i]! > resetAt[chosen]!)) {
      chosen = i
      least = left
    }
  }
  return chosen
}

/** A stack's fields in the older formats: the numbers of its policy with the least left (`expiringIndex`). */
export function writeStack (write: ExpiringLimit, reply: FastifyReply, quotas: readonly number[], remaining: ArrayLike<number>, resetAt: ArrayLike<number>, now: number, retrySeconds: number | undefined): void {
  const i = expiringIndex(quotas, remaining, resetAt)
  const quota = quotas[i]!
  write(reply, quota, clampRemaining(remaining[i]!, quota), resetSeconds(resetAt[i]!, now, retrySeconds))
}
