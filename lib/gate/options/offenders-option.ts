import { exactObject, positiveInteger } from '../../validation/checks.js'
import { AdmissionOptionError } from '../errors.js'

/**
 * `offenders`: the clients refused most over the last minute, in `stats().offenders` — those refused
 * for what they did (their quota, their in-flight limit: the 429s). On by default: it costs nothing
 * on an admitted request and little on a refusal, and its memory is bounded whatever the number of
 * clients (docs/guides/offenders.md).
 */
export interface OffendersOptions {
  /** How many clients are listed (default 20, at most 100). */
  top?: number
  /**
   * List the client keys themselves (default false: each key's digest, an HMAC under the
   * `headers.partitionKey` secret when there is one — the `pk` its client is sent — else under a
   * secret drawn at registration). A key is an address, an account, an API key: whoever reads
   * `stats()` reads them.
   */
  rawKeys?: boolean
}

/** The validated `offenders` option. */
export interface OffendersSettings {
  readonly top: number
  readonly rawKeys: boolean
}

export const DEFAULT_OFFENDERS = 20
export const MAX_OFFENDERS = 100

const complain = AdmissionOptionError.complain
const EXPECTED = 'a boolean, or an object { top?, rawKeys? }'
const SHAPE = { keys: ['top', 'rawKeys'], expected: EXPECTED, nullPrototype: true, options: true }
const DEFAULTS: OffendersSettings = Object.freeze({ top: DEFAULT_OFFENDERS, rawKeys: false })

const TOP = `an integer from 1 to ${MAX_OFFENDERS} (the clients listed; the memory held grows with it)`

/** `offenders`: true or absent (the defaults), false (off: no sketch, nothing on any refusal), or `{ top?, rawKeys? }`. */
export function offendersOption (value: unknown): OffendersSettings | undefined {
  if (value === false) return undefined
  if (value === undefined || value === true) return DEFAULTS
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new AdmissionOptionError('offenders', EXPECTED, value)
  const input = exactObject(complain, 'offenders', value, SHAPE)
  const top = input.top === undefined ? DEFAULT_OFFENDERS : positiveInteger(complain, 'offenders.top', input.top, TOP)
  if (top > MAX_OFFENDERS) throw new AdmissionOptionError('offenders.top', TOP, top)
  const rawKeys = input.rawKeys ?? false
  if (typeof rawKeys !== 'boolean') throw new AdmissionOptionError('offenders.rawKeys', 'a boolean (true lists the client keys themselves, false their digests)', rawKeys)
  return Object.freeze({ top, rawKeys })
}
