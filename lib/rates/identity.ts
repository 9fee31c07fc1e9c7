import { Buffer } from 'node:buffer'
import { isPositiveSafeInteger } from '../validation/checks.js'
import { show } from '../validation/show.js'
import { RatesInvalidArgumentError, memberPath } from './errors.js'

export type IdentityPrimitive = string | number | bigint | boolean
/** A primitive, a tuple of at most 16 primitives, or a plain record of at most 16 primitive fields. */
export type Identity = IdentityPrimitive | readonly IdentityPrimitive[] | { readonly [field: string]: IdentityPrimitive }

/** Items of a tuple identity, fields of a record identity. */
export const MAX_IDENTITY_PARTS = 16
/** UTF-8 bytes of an identity's canonical encoding. */
export const MAX_IDENTITY_BYTES = 1024

const PRIMITIVE = 'a string, a finite number, a bigint or a boolean'
const IDENTITY = `${PRIMITIVE}, a tuple of at most ${MAX_IDENTITY_PARTS} of those, or a plain record of at most ${MAX_IDENTITY_PARTS} such fields`
const WELL_FORMED = 'a well-formed Unicode string (no lone surrogates)'
// Each UTF-16 code unit of a well-formed string is at most 3 UTF-8 bytes (a surrogate pair is 2
// units and 4 bytes), so an encoding this short in code units fits without counting bytes.
const SHORT = Math.floor(MAX_IDENTITY_BYTES / 3)

interface WellFormed { isWellFormed (): boolean }
export function wellFormed (text: string): boolean {
  return (text as string & WellFormed).isWellFormed()
}

/**
 * The canonical, typed encoding of an identity, the key of its state in a backend. Injective: two
 * identities get the same string only when they are structurally equal (same types, same values,
 * record fields in any order).
 *
 * Format (one type tag first, so the four shapes and the four primitive types never meet):
 * - string `s<text>`, number `n<String(n)>`, bigint `b<decimal>`, boolean `t` or `f`;
 * - tuple `T` then each item as `<length>:<item encoding>`;
 * - record `R` then, by field name in UTF-16 code-unit order, `<length>:<name><length>:<value encoding>`.
 * Lengths are decimal counts of UTF-16 code units, so a separator inside a string is just text.
 * Examples: `'alice'` → `salice`, `1` → `n1`, `1n` → `b1`, `'1'` → `s1`, `true` → `t`,
 * `['a', 1]` → `T2:sa2:n1`, `{ userId: 'u1', tenantId: 't1' }` → `R8:tenantId3:st16:userId3:su1`.
 *
 * Numbers: any finite number, written by `String()` (the shortest round-trip form, so one string
 * per value, e.g. `1e+21`). `-0` is the same identity as `0` (`String(-0)` is `'0'`, and no caller
 * means a different client by a negative zero). NaN and the infinities are rejected.
 *
 * Anything else is a `RatesInvalidArgumentError` whose `path` names the offending part
 * (`identity`, `identity[2]`, `identity.userId`): undefined, null, symbols, functions, nested
 * arrays or objects, class instances (Date, Map, boxed primitives, Array subclasses), sparse arrays,
 * accessor, symbol-keyed or non-enumerable record properties, more than 16 items or fields, lone
 * surrogates in strings or field names, or an encoding over 1024 UTF-8 bytes. Accessors are never
 * invoked. A tuple is read by index only: other own properties of the array are not part of it.
 */
export function encodeIdentity (identity: unknown): string {
  // The common case, once per request: a short string.
  if (typeof identity === 'string' && identity.length < SHORT && wellFormed(identity)) return 's' + identity
  let encoded: string
  if (typeof identity !== 'object' || identity === null) encoded = primitive(identity, 'identity', IDENTITY)
  else if (Array.isArray(identity)) encoded = tuple(identity)
  else encoded = record(identity)
  if (encoded.length > SHORT) {
    const bytes = Buffer.byteLength(encoded, 'utf8')
    if (bytes > MAX_IDENTITY_BYTES) {
      throw new RatesInvalidArgumentError('identity', `an identity whose canonical encoding is at most ${MAX_IDENTITY_BYTES} UTF-8 bytes`, identity,
        { got: `${show(identity)}, which encodes to ${bytes} bytes` })
    }
  }
  return encoded
}

function primitive (value: unknown, path: string, expected: string): string {
  switch (typeof value) {
    case 'string':
      if (!wellFormed(value)) throw new RatesInvalidArgumentError(path, WELL_FORMED, value)
      return 's' + value
    case 'number':
      if (!Number.isFinite(value)) throw new RatesInvalidArgumentError(path, 'a finite number', value)
      return 'n' + String(value)
    case 'bigint':
      return 'b' + String(value)
    case 'boolean':
      return value ? 't' : 'f'
    default:
      throw new RatesInvalidArgumentError(path, expected, value)
  }
}

function part (encoded: string): string {
  return `${encoded.length}:${encoded}`
}

function tuple (items: unknown[]): string {
  if (Object.getPrototypeOf(items) !== Array.prototype) throw new RatesInvalidArgumentError('identity', IDENTITY, items)
  if (items.length > MAX_IDENTITY_PARTS) {
    throw new RatesInvalidArgumentError('identity', `a tuple of at most ${MAX_IDENTITY_PARTS} items`, items, { got: `${items.length} items` })
  }
  let encoded = 'T'
  for (let i = 0; i < items.length; i++) {
    const path = `identity[${i}]`
    const descriptor = Object.getOwnPropertyDescriptor(items, i)
    if (descriptor === undefined) throw new RatesInvalidArgumentError(path, PRIMITIVE, undefined, { got: 'a hole (the array is sparse)' })
    encoded += part(primitive(dataValue(path, descriptor), path, PRIMITIVE))
  }
  return encoded
}

function record (fields: object): string {
  const proto = Object.getPrototypeOf(fields)
  if (proto !== Object.prototype && proto !== null) throw new RatesInvalidArgumentError('identity', IDENTITY, fields)
  const keys = Reflect.ownKeys(fields)
  if (keys.length > MAX_IDENTITY_PARTS) {
    throw new RatesInvalidArgumentError('identity', `a record of at most ${MAX_IDENTITY_PARTS} fields`, fields, { got: `${keys.length} own properties` })
  }
  const entries: Array<[string, string]> = []
  for (const key of keys) {
    if (typeof key === 'symbol') {
      throw new RatesInvalidArgumentError(`identity[${String(key)}]`, 'a field with a string name (no symbol keys)', key, { got: 'a symbol key' })
    }
    const path = memberPath('identity', key)
    if (!wellFormed(key)) throw new RatesInvalidArgumentError(path, `a field whose name is ${WELL_FORMED}`, key)
    // Own keys from Reflect.ownKeys() always have a descriptor.
    const descriptor = Object.getOwnPropertyDescriptor(fields, key) as PropertyDescriptor
    const value = dataValue(path, descriptor)
    if (descriptor.enumerable !== true) {
      throw new RatesInvalidArgumentError(path, 'an enumerable field', value, { got: `a non-enumerable property holding ${show(value)}` })
    }
    entries.push([key, primitive(value, path, PRIMITIVE)])
  }
  // Field names are unique, so the order is total; `<` compares UTF-16 code units.
  entries.sort((a, b) => (a[0] < b[0] ? -1 : 1))
  let encoded = 'R'
  for (const [key, value] of entries) encoded += part(key) + part(value)
  return encoded
}

/** The value of a data property; an accessor is an error and is never invoked. */
function dataValue (path: string, descriptor: PropertyDescriptor): unknown {
  if (!('value' in descriptor)) {
    throw new RatesInvalidArgumentError(path, `${PRIMITIVE} in a data property`, descriptor, { got: 'an accessor property (getter or setter), which is not invoked' })
  }
  return descriptor.value
}

/**
 * A request's cost: `undefined` is 1; otherwise a positive safe integer at most `capacity` (the
 * policy's capacity, see `capacityOf()`; for a stack, the smallest of its policies', which
 * `capacityName` says), else `RatesInvalidArgumentError` at path `cost`.
 */
export function validateCost (cost: unknown, capacity: number, capacityName = "the policy's capacity"): number {
  if (cost === undefined) return 1
  if (!isPositiveSafeInteger(cost) || cost > capacity) {
    throw new RatesInvalidArgumentError('cost', `a positive safe integer at most ${capacityName} (${capacity})`, cost)
  }
  return cost
}

/**
 * Units a charge takes (positive) or returns (negative): a safe integer of at most the policy's
 * capacity either way, since no state holds a debt of more than one capacity. 0 charges nothing.
 */
export function validateUnits (units: unknown, capacity: number, capacityName = "the policy's capacity"): number {
  if (typeof units !== 'number' || !Number.isSafeInteger(units) || Math.abs(units) > capacity) {
    throw new RatesInvalidArgumentError('units', `a safe integer from -${capacity} to ${capacity} (${capacityName}: a charge takes or returns at most that much)`, units)
  }
  return units
}
