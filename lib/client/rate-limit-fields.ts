import { fieldValues, wholeSeconds } from './retry-after.js'

/** Response fields as undici hands them to a handler: lower-case names, a repeated field as an array. */
export type ResponseHeaders = Readonly<Record<string, string | string[] | undefined>>

/** `x-ratelimit-reset` at or above this is a time (seconds since the epoch, as GitHub sends it), below it a delta. */
const EPOCH_SECONDS_FROM = 1_000_000_000

/**
 * The members of a structured-field list or dictionary (RFC 9651), split at the commas that are
 * not inside a quoted string. Only what the RateLimit drafts write is read: tokens, strings,
 * integers and parameters; whatever else a member holds is left to the reader, who ignores it.
 */
export function listMembers (text: string): string[] {
  const members: string[] = []
  let quoted = false
  let start = 0
  for (let i = 0; i < text.length; i++) {
    const c = text[i]
    if (c === '\\' && quoted) i++
    else if (c === '"') quoted = !quoted
    else if (c === ',' && !quoted) {
      members.push(text.slice(start, i).trim())
      start = i + 1
    }
  }
  members.push(text.slice(start).trim())
  return members.filter((member) => member !== '')
}

/** `key=value` pairs of a member (its parameters after `;`, or a draft-7 dictionary member), the name itself skipped. */
function pairs (member: string): Map<string, string> {
  const found = new Map<string, string>()
  for (const part of member.split(';')) {
    const at = part.indexOf('=')
    if (at > 0) found.set(part.slice(0, at).trim().toLowerCase(), part.slice(at + 1).trim())
  }
  return found
}

/** The later of two optional times. */
function later (a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b
  return b === undefined || b < a ? a : b
}

/** `remaining` 0 and a reset in whole seconds: the time the quota is back; otherwise undefined. */
function exhausted (remaining: string | undefined, reset: string | undefined, receivedAt: number): number | undefined {
  if (remaining === undefined || reset === undefined || wholeSeconds(remaining) !== 0) return undefined
  const seconds = wholeSeconds(reset)
  return seconds === undefined ? undefined : receivedAt + seconds * 1000
}

/**
 * The combined `RateLimit` field, either draft: draft 11's list, one item per policy
 * (`"default";r=0;t=5`), or draft 7's dictionary (`limit=100, remaining=0, reset=5`). The latest
 * time at which a policy with nothing left is back.
 */
function combinedField (text: string, receivedAt: number): number | undefined {
  const members = listMembers(text)
  if (members.some((member) => member.includes(';'))) {
    let at: number | undefined
    for (const member of members) {
      const found = pairs(member)
      at = later(at, exhausted(found.get('r'), found.get('t'), receivedAt))
    }
    return at
  }
  const dictionary = pairs(members.join(';'))
  return exhausted(dictionary.get('remaining'), dictionary.get('reset'), receivedAt)
}

/** `x-ratelimit-reset`: delta-seconds, or seconds since the epoch (never before `receivedAt`). */
function vendorField (remaining: string | undefined, reset: string | undefined, receivedAt: number): number | undefined {
  const epoch = reset !== undefined && /^\d+$/.test(reset.trim()) ? Number(reset.trim()) : 0
  if (epoch < EPOCH_SECONDS_FROM) return exhausted(remaining, reset, receivedAt)
  return exhausted(remaining, '0', Math.max(receivedAt, epoch * 1000))
}

/**
 * The time (ms since the epoch) until which the response's rate-limit fields say nothing is left:
 * some policy's remaining is 0 and its reset is given. Read from every format a server may send —
 * `RateLimit` (draft 11 or draft 7), `RateLimit-Remaining`/`RateLimit-Reset` (draft 6) and
 * `x-ratelimit-remaining`/`x-ratelimit-reset` — the latest of them (never early for any).
 * Undefined when none says the quota is spent.
 */
export function quotaBackAt (headers: ResponseHeaders, receivedAt: number): number | undefined {
  let at: number | undefined
  for (const text of fieldValues(headers.ratelimit)) at = later(at, combinedField(text, receivedAt))
  at = later(at, exhausted(first(headers['ratelimit-remaining']), first(headers['ratelimit-reset']), receivedAt))
  return later(at, vendorField(first(headers['x-ratelimit-remaining']), first(headers['x-ratelimit-reset']), receivedAt))
}

function first (value: string | string[] | undefined): string | undefined {
  return fieldValues(value)[0]
}
