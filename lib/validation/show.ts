import { inspect } from 'node:util'

/** A value as a reader wants it in a message: short, typed, one line. */
export function show (value: unknown): string {
  const text = inspect(value, { depth: 1, breakLength: Infinity, maxStringLength: 80, maxArrayLength: 8 })
  return typeof value === 'object' && value !== null ? text : `${text} (${value === null ? 'null' : typeof value})`
}
