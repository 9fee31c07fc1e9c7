import { Buffer } from 'node:buffer'
import { keepValue, show } from '../../validation/show.js'

/*
 * Structured Field Values (RFC 9651), serialisation only, for what `RateLimit-Policy` and
 * `RateLimit` are made of (draft-ietf-httpapi-ratelimit-headers): a List of Items, each a bare
 * item with Parameters, whose values are Integers (`q`, `w`, `r`, `t`), Strings (the policy's
 * name, `qu`), Byte Sequences (`pk`), and the Tokens and Booleans a vendor's parameter may take.
 * Inner Lists, Dictionaries, Decimals, Dates and Display Strings are left out: neither field uses
 * them, and what is not here cannot be serialised wrongly.
 *
 * Every function either returns the canonical serialisation or throws a StructuredFieldError:
 * a field value is never sent half-valid. The hot path keeps to concatenation: an item's start is
 * serialised once per route (`serializeItemStarts`), and each request appends
 * `serializeInteger(n)`, which is the integer's decimal digits after two comparisons.
 */

/** A Token (RFC 9651 §3.3.4): an object of its own, so that a plain string is always a String. */
export interface Token { readonly token: string }

/** A bare item of the kinds these fields use; a JavaScript number is an Integer (no Decimals). */
export type BareItem = number | string | boolean | Token | Uint8Array

/** A parameter: its key and its value. */
export type Parameter = readonly [key: string, value: BareItem]

/** An Item: a bare item and its Parameters, in order, each key once. */
export type Item = readonly [bareItem: BareItem, parameters: readonly Parameter[]]

/** The stable codes: which rule of RFC 9651 a value broke. */
export type StructuredFieldErrorCode =
  | 'ADMISSION_SF_INVALID_INTEGER'
  | 'ADMISSION_SF_INVALID_STRING'
  | 'ADMISSION_SF_INVALID_TOKEN'
  | 'ADMISSION_SF_INVALID_KEY'
  | 'ADMISSION_SF_DUPLICATE_KEY'
  | 'ADMISSION_SF_INVALID_BARE_ITEM'

/**
 * A value the serialiser cannot write as RFC 9651 requires. Internal (not exported by the package):
 * the plugin checks what reaches the fields (names, numbers) before it serialises, so one of these
 * at run time is a bug, and a TypeError says so. `value` (not enumerable, as on the package's own
 * errors) is what was given.
 */
export class StructuredFieldError extends TypeError {
  declare readonly code: StructuredFieldErrorCode
  declare readonly value: unknown
  constructor (code: StructuredFieldErrorCode, expected: string, value: unknown) {
    super(`Expected ${expected}, got ${show(value)}`)
    // A literal: the bundle may rename the class (`class _X`).
    this.name = 'StructuredFieldError'
    this.code = code
    keepValue(this, value)
  }
}

/** RFC 9651 §3.3.1: at most fifteen decimal digits, either sign. */
export const MAX_INTEGER = 999_999_999_999_999

/** Between a List's members (RFC 9651 §4.1.1): what a hot path that joins serialised items puts between them. */
export const LIST_SEPARATOR = ', '

/** sf-string's characters: printable ASCII, 0x20 to 0x7E. */
const STRING = /^[\x20-\x7e]*$/
/** `"` and `\`, which a String escapes with a `\`. */
const STRING_ESCAPES = /["\\]/g
/** sf-token: ALPHA or `*`, then tchar, `:` or `/` (RFC 9651 §3.3.4, RFC 9110 §5.6.2). */
const TOKEN = /^[A-Za-z*][!#$%&'*+\-.^_`|~0-9A-Za-z:/]*$/
/** key: lcalpha or `*`, then lcalpha, DIGIT, `_`, `-`, `.` or `*` (RFC 9651 §3.1.2). */
const KEY = /^[a-z*][a-z0-9_\-.*]*$/

/**
 * A List of Items (RFC 9651 §4.1.1), members joined by `, `. An empty List is `''`: RFC 9651
 * (§4.1) says not to send the field at all then, and `''` is how the caller tells.
 */
export function serializeList (items: readonly Item[]): string {
  let value = ''
  for (let i = 0; i < items.length; i++) {
    const [bareItem, parameters] = items[i]!
    value += (i === 0 ? '' : LIST_SEPARATOR) + serializeItem(bareItem, parameters)
  }
  return value
}

/** An Item (RFC 9651 §4.1.3): its bare item, then its Parameters. */
export function serializeItem (bareItem: BareItem, parameters: readonly Parameter[] = []): string {
  return serializeBareItem(bareItem) + serializeParameters(parameters)
}

/**
 * An Item made once per route, whose last parameters' values come per request: the serialisation
 * cut just after each open key's `=`. `serializeItemStarts('default', [], ['r', 't'])` is
 * `['"default";r=', ';t=']`, and a request's item is
 * `starts[0] + serializeInteger(r) + starts[1] + serializeInteger(t)` — canonical, since the open
 * parameters are checked here (valid keys, none twice, none among `parameters`) and each value is
 * serialised by its own function. An open value must not be a Boolean true, which a canonical
 * serialisation writes as the bare key, without `=`.
 */
export function serializeItemStarts (bareItem: BareItem, parameters: readonly Parameter[], openKeys: readonly [string, ...string[]]): string[] {
  const item = serializeItem(bareItem, parameters)
  const keys = parameters.map(([key]) => key)
  return openKeys.map((key, i) => {
    const start = serializeParameterStart(key, keys)
    keys.push(key)
    return i === 0 ? item + start : start
  })
}

/** Parameters (RFC 9651 §4.1.1.2): `;key=value` each, a Boolean true as the bare key. */
export function serializeParameters (parameters: readonly Parameter[]): string {
  let value = ''
  const keys: string[] = []
  for (const [key, parameterValue] of parameters) {
    value += parameterValue === true ? `;${serializeUniqueKey(key, keys)}` : serializeParameterStart(key, keys) + serializeBareItem(parameterValue)
    keys.push(key)
  }
  return value
}

/** `;key=`, for a key not among `before` (Parameters are a map: one value a key). */
function serializeParameterStart (key: string, before: readonly string[]): string {
  return `;${serializeUniqueKey(key, before)}=`
}

function serializeUniqueKey (key: string, before: readonly string[]): string {
  const serialized = serializeKey(key)
  if (before.includes(key)) throw new StructuredFieldError('ADMISSION_SF_DUPLICATE_KEY', `a key not already among the parameters (${before.join(', ')})`, key)
  return serialized
}

/** A key (RFC 9651 §4.1.1.3): as it is, once checked against the grammar. */
export function serializeKey (key: string): string {
  if (typeof key !== 'string' || !KEY.test(key)) throw new StructuredFieldError('ADMISSION_SF_INVALID_KEY', 'a Structured Field key (a-z or *, then a-z, 0-9, _, -, . or *)', key)
  return key
}

/** A bare item (RFC 9651 §4.1.3.1), by its kind; anything else throws. */
export function serializeBareItem (value: BareItem): string {
  switch (typeof value) {
    case 'number': return serializeInteger(value)
    case 'string': return serializeString(value)
    case 'boolean': return serializeBoolean(value)
    case 'object':
      if (value instanceof Uint8Array) return serializeByteSequence(value)
      // `null` is an object too, and a caller that is not TypeScript can pass it.
      if (value !== null && 'token' in value) return serializeToken(value)
  }
  throw new StructuredFieldError('ADMISSION_SF_INVALID_BARE_ITEM', 'an Integer, a String, a Token ({ token }), a Byte Sequence (Uint8Array) or a Boolean', value)
}

/**
 * An Integer (RFC 9651 §4.1.4): its decimal digits, which is what `String` gives for an integer
 * within ±999,999,999,999,999 (no exponent below 1e21; -0 is `0`). Made for the hot path: two
 * comparisons and `Number.isInteger`, which also turns away NaN, the infinities and fractions.
 */
export function serializeInteger (n: number): string {
  if (n <= MAX_INTEGER && n >= -MAX_INTEGER && Number.isInteger(n)) return String(n)
  throw new StructuredFieldError('ADMISSION_SF_INVALID_INTEGER', 'an Integer from -999,999,999,999,999 to 999,999,999,999,999 (no Decimals)', n)
}

/** A String (RFC 9651 §4.1.6): quoted, `"` and `\` escaped; printable ASCII only, or it throws. */
export function serializeString (s: string): string {
  if (typeof s !== 'string' || !STRING.test(s)) throw new StructuredFieldError('ADMISSION_SF_INVALID_STRING', 'a Structured Field String (printable ASCII, 0x20 to 0x7E)', s)
  return `"${s.replace(STRING_ESCAPES, '\\$&')}"`
}

/** A Token (RFC 9651 §4.1.7): as it is, once checked against the grammar. */
export function serializeToken (value: Token): string {
  const { token } = value
  if (typeof token !== 'string' || !TOKEN.test(token)) throw new StructuredFieldError('ADMISSION_SF_INVALID_TOKEN', 'a Structured Field Token (a letter or *, then tchar, : or /)', token)
  return token
}

/** A Byte Sequence (RFC 9651 §4.1.8): base64 with padding, between colons; a Buffer is a Uint8Array. */
export function serializeByteSequence (bytes: Uint8Array): string {
  return `:${Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64')}:`
}

/** A Boolean (RFC 9651 §4.1.9): `?1` or `?0`. */
export function serializeBoolean (value: boolean): string {
  return value ? '?1' : '?0'
}
