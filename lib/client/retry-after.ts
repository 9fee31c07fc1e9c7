/** The longest wait read from a field, in seconds (about 31 years): more is read as this, and stays an exact integer of ms. */
const MAX_SECONDS = 1_000_000_000

/** A field's values as one list: undici gives a repeated field as an array. */
export function fieldValues (value: string | string[] | undefined): string[] {
  if (value === undefined) return []
  return Array.isArray(value) ? value : [value]
}

/**
 * Seconds written as digits (`5`, `012`), capped at `MAX_SECONDS`; undefined for anything else. A
 * fraction (`1.5`), which the fields do not allow, is read rounded up: waiting longer is honest.
 */
export function wholeSeconds (text: string): number | undefined {
  const trimmed = text.trim()
  if (!/^\d+(\.\d+)?$/.test(trimmed)) return undefined
  return Math.min(Math.ceil(Number(trimmed)), MAX_SECONDS)
}

/** An HTTP-date starts with the day's name (IMF-fixdate, RFC 850 and asctime alike): anything else is not read as a date, however lax `Date.parse` is. */
const HTTP_DATE = /^[A-Za-z]{3,9},? /

/**
 * The time (ms since the epoch) before which `Retry-After` asks that nothing be sent: delta-seconds
 * from `receivedAt`, or an HTTP-date (RFC 9110 §10.2.3). Counted from when the response was read,
 * never from before: the server's clock started earlier, so this is never early. A date already
 * past is `receivedAt`. Several values (a repeated field): the latest, never early for any of them.
 * Undefined when the field is absent or none of its values reads.
 */
export function retryAfterTime (value: string | string[] | undefined, receivedAt: number): number | undefined {
  let at: number | undefined
  for (const text of fieldValues(value)) {
    const seconds = wholeSeconds(text)
    const date = seconds === undefined && HTTP_DATE.test(text.trim()) ? Date.parse(text.trim()) : Number.NaN
    const time = seconds !== undefined ? receivedAt + seconds * 1000 : Number.isNaN(date) ? undefined : Math.max(receivedAt, date)
    if (time !== undefined && (at === undefined || time > at)) at = time
  }
  return at
}
