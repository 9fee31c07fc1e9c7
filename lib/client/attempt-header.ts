import type { Dispatcher } from 'undici'

/**
 * The field that numbers a request's attempts: `1` on the first, `2`, `3`, … on retries, sent on
 * every attempt, so a server can tell a retry from a first attempt (and shed retries first).
 */
export const RETRY_ATTEMPT_HEADER = 'retry-attempt'

type Headers = Dispatcher.DispatchOptions['headers']

const isAttemptName = (name: unknown): boolean => String(name).toLowerCase() === RETRY_ATTEMPT_HEADER

/**
 * The request's headers with `Retry-Attempt: <attempt>`: an object stays an object, an array (flat,
 * `[name, value, …]`, as undici reads arrays) stays one, other iterables of pairs (a `Map`,
 * `Headers`) become a flat array. Any `Retry-Attempt` the caller set is replaced, never sent twice.
 * The caller's object or array is not changed: every attempt builds its own.
 */
export function withAttempt (headers: Headers, attempt: number): Headers {
  const value = String(attempt)
  if (headers === undefined || headers === null) return { [RETRY_ATTEMPT_HEADER]: value }
  if (Array.isArray(headers) || typeof (headers as Iterable<unknown>)[Symbol.iterator] === 'function') {
    const flat: unknown[] = Array.isArray(headers) ? headers : [...(headers as Iterable<readonly [unknown, unknown]>)].flat()
    const kept: unknown[] = []
    // An odd array is kept odd, for undici to refuse as it would have without this interceptor.
    for (let i = 0; i < flat.length; i += 2) {
      if (!isAttemptName(flat[i])) kept.push(...flat.slice(i, i + 2))
    }
    kept.push(RETRY_ATTEMPT_HEADER, value)
    return kept as Headers
  }
  const copy: Record<string, string | string[] | undefined> = {}
  for (const [name, field] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    if (!isAttemptName(name)) copy[name] = field
  }
  copy[RETRY_ATTEMPT_HEADER] = value
  return copy
}
