import { inspect } from 'node:util'

/** The most characters `show()` gives: a message stays one short line whatever the value. */
const MAX_SHOWN = 200

/**
 * A value as a reader wants it in a message: short, typed, one line. Long strings, arrays and maps
 * are cut by `inspect`; whatever is still longer (many keys, a long key) is cut here, and the cut
 * says how long the whole was.
 */
export function show (value: unknown): string {
  const text = inspect(value, { depth: 1, breakLength: Infinity, maxStringLength: 80, maxArrayLength: 8 })
  const shown = typeof value === 'object' && value !== null ? text : `${text} (${value === null ? 'null' : typeof value})`
  if (shown.length <= MAX_SHOWN) return shown
  const mark = `… (${shown.length} characters)`
  return shown.slice(0, MAX_SHOWN - mark.length) + mark
}

/**
 * Keeps `value` on `error` as a property that is not enumerable: an error handler can read it, but
 * loggers (pino copies an error's enumerable properties) and `JSON.stringify` never copy it — a
 * value from a request can be megabytes long, or a secret (an API token returned as a key).
 */
export function keepValue (error: Error, value: unknown): void {
  Object.defineProperty(error, 'value', { value, enumerable: false, writable: false, configurable: true })
}
