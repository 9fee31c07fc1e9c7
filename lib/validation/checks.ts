import { types } from 'node:util'
import { isPositiveSafeInteger } from '../core/config.js'
import { show } from './show.js'
import { nearest } from './suggest.js'

/**
 * The package's one validation toolkit: every option object, policy, identity field and cost is
 * checked with these, so that one rule holds everywhere — in particular for objects: an exact plain
 * object, read once through its property descriptors, so that a getter is never invoked and a
 * Proxy is refused (either could answer differently on a second read than on the first).
 *
 * A check that fails hands a `Complaint` to the caller's `Complain`, which makes the caller's typed
 * error (`AdmissionOptionError` at the gate, `RatesInvalidArgumentError` in the rates capability).
 * Either error's message is `complaintMessage()`.
 */
export interface Complaint {
  /** Where the bad value is (`rateLimit.limit`, `options.timeoutMs`). */
  readonly path: string
  /** What it should have been, as a noun phrase. */
  readonly expected: string
  readonly value: unknown
  /** What the message names, when not `path` (an object, for a complaint about one of its keys). */
  readonly subject?: string
  /** What the message says was given, when not `show(value)`. */
  readonly got?: string
}

export type Complain = (complaint: Complaint) => Error

/** "Expected `<subject>` to be <expected>, got <got>". */
export function complaintMessage (complaint: Complaint): string {
  return `Expected \`${complaint.subject ?? complaint.path}\` to be ${complaint.expected}, got ${complaint.got ?? show(complaint.value)}`
}

export { isPositiveSafeInteger }

export const POSITIVE_INTEGER = 'a positive safe integer'

export function positiveInteger (complain: Complain, path: string, value: unknown, expected = POSITIVE_INTEGER): number {
  if (!isPositiveSafeInteger(value)) throw complain({ path, expected, value })
  return value
}

/** A function, or undefined when absent. */
export function optionalFunction<F> (complain: Complain, path: string, value: unknown, expected = 'a function'): F | undefined {
  if (value === undefined) return undefined
  if (typeof value !== 'function') throw complain({ path, expected, value })
  return value as F
}

/**
 * The items of an exact array (no Proxy, no other prototype, no holes, no accessors, nothing but
 * its indices and `length`), read through their descriptors like `exactObject`'s fields, so that
 * no getter runs; at most `max` of them. The caller checks each item under `path[i]`.
 */
export function exactList (complain: Complain, path: string, value: unknown, expected: string, max: number): unknown[] {
  if (!Array.isArray(value) || types.isProxy(value) || Object.getPrototypeOf(value) !== Array.prototype) throw complain({ path, expected, value })
  if (value.length > max) throw complain({ path, expected: `${expected} (at most ${max} entries)`, value, got: `${value.length} entries` })
  const keys = Reflect.ownKeys(value)
  if (keys.length !== value.length + 1) throw complain({ path, expected: `${expected} (no holes, no other keys)`, value })
  const items: unknown[] = []
  for (let i = 0; i < value.length; i++) {
    const descriptor = Object.getOwnPropertyDescriptor(value, i)
    const at = `${path}[${i}]`
    if (descriptor === undefined) throw complain({ path: at, expected: `${expected} (no holes)`, value: undefined, got: 'a hole' })
    if (!('value' in descriptor)) throw complain({ path: at, expected: 'a data property', value: descriptor, got: 'an accessor property (getter or setter), which is not invoked' })
    items.push(descriptor.value)
  }
  return items
}

/** The non-empty strings of an exact array (see `exactList`), at most `max` of them. */
export function stringList (complain: Complain, path: string, value: unknown, expected: string, max: number): string[] {
  const items = exactList(complain, path, value, expected, max)
  items.forEach((item, i) => {
    if (typeof item !== 'string' || item === '') throw complain({ path: `${path}[${i}]`, expected: 'a non-empty string', value: item })
  })
  return items as string[]
}

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/

/** The path of `key` inside the value at `base`, as code would write it: `base.key`, or `base["some key"]`. */
export function memberPath (base: string, key: string): string {
  return IDENTIFIER.test(key) ? `${base}.${key}` : `${base}[${JSON.stringify(key)}]`
}

export interface Shape {
  /** The keys the object may have. */
  readonly keys: readonly string[]
  /** The object as the message describes it: `a plain object { algorithm, limit, windowMs, burst? }`. */
  readonly expected: string
  /** Whether a null-prototype object is accepted too (option bags; a policy is an exact plain object). */
  readonly nullPrototype?: boolean
  /**
   * An options bag: an unknown key is named by its own path and the message lists the known
   * options (`Expected \`options.nope\` to be one of a, b (unknown option), got 1 (number)`); a
   * value-shaped object (a policy) names itself and the key instead.
   */
  readonly options?: boolean
  /**
   * For an options bag: what an unknown key that another plugin has (@fastify/rate-limit's `max`)
   * becomes here, said instead of the list (`` `rateLimit: { limit }` ``). An unknown key near a
   * known one is told that one (`did you mean \`maxInFlight\`?`).
   */
  readonly hints?: Readonly<Record<string, string>>
}

/** What an unknown key of an options bag should have been: the hint for it, the key it is near, or the list. */
function unknownOption (key: string | symbol, shape: Shape): string {
  if (typeof key === 'string') {
    const hints = shape.hints
    if (hints !== undefined && Object.prototype.hasOwnProperty.call(hints, key)) return `a known option (unknown option; ${hints[key]!})`
    const near = nearest(key, shape.keys)
    if (near !== undefined) return `a known option (unknown option; did you mean \`${near}\`?)`
  }
  return `one of ${shape.keys.join(', ')} (unknown option)`
}

/**
 * The own data properties of an exact plain object, copied through their descriptors: no getter
 * runs, nothing is read twice. Refused, each with the path of what is wrong: not an object, an
 * array, a class instance or another prototype, a Proxy, a symbol key, an unknown key, an accessor,
 * a non-enumerable property. An own property holding `undefined` counts as absent.
 */
export function exactObject (complain: Complain, path: string, value: unknown, shape: Shape): Record<string, unknown> {
  const { keys, expected } = shape
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw complain({ path, expected, value })
  if (types.isProxy(value)) throw complain({ path, expected, value, got: 'a Proxy, which is not read' })
  const proto = Object.getPrototypeOf(value) as unknown
  if (proto !== Object.prototype && !(proto === null && shape.nullPrototype === true)) throw complain({ path, expected, value })
  const fields: Record<string, unknown> = {}
  for (const key of Reflect.ownKeys(value)) {
    if (shape.options === true && (typeof key === 'symbol' || !keys.includes(key))) {
      const descriptor = Object.getOwnPropertyDescriptor(value, key) as PropertyDescriptor
      throw complain({ path: `${path}.${String(key)}`, expected: unknownOption(key, shape), value: 'value' in descriptor ? descriptor.value : descriptor })
    }
    if (typeof key === 'symbol') {
      throw complain({ path: `${path}[${String(key)}]`, expected: `${expected} (no symbol keys)`, value: key, subject: path, got: `the symbol key ${String(key)}` })
    }
    const at = memberPath(path, key)
    // An own key from Reflect.ownKeys() always has a descriptor.
    const descriptor = Object.getOwnPropertyDescriptor(value, key) as PropertyDescriptor
    if (!keys.includes(key)) {
      const near = nearest(key, keys)
      throw complain({ path: at, expected: `${expected} (no other keys${near === undefined ? '' : `; did you mean \`${near}\`?`})`, value: key, subject: path, got: `the unknown key ${JSON.stringify(key)}` })
    }
    if (!('value' in descriptor)) {
      throw complain({ path: at, expected: 'a data property', value: descriptor, got: 'an accessor property (getter or setter), which is not invoked' })
    }
    if (descriptor.enumerable !== true) {
      throw complain({ path: at, expected: 'an enumerable property', value: descriptor.value, got: `a non-enumerable property holding ${show(descriptor.value)}` })
    }
    if (descriptor.value !== undefined) fields[key] = descriptor.value
  }
  return fields
}

/**
 * A finite number in [min, max], either end excluded on request (a share such as 0.1 of a limit,
 * a tolerance such as 1.5, a utilization in (0, 1)): not an integer check, so NaN and the
 * infinities are refused here.
 */
export function numberInRange (complain: Complain, path: string, value: unknown, min: number, max: number, expected: string, maxExclusive = false, minExclusive = false): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max ||
    (maxExclusive && value === max) || (minExclusive && value === min)) throw complain({ path, expected, value })
  return value
}
