import { exactObject, numberInRange } from '../../validation/checks.js'
import { AdmissionOptionError } from '../errors.js'

/**
 * `retries`: requests that say they are retries (the attempt header, `Retry-Attempt: 2` and up)
 * are shed before first attempts. On by default: the header only ever lowers a request's own
 * priority, so a client that sends none is served as without it.
 */
export interface RetriesOptions {
  /** The attempt header's name (default `'retry-attempt'`): a decimal integer, 1 for a first attempt. */
  header?: string
  /**
   * The share of an in-flight limit a retry never takes (default 0.1, from 0 to below 1): a retry is
   * admitted only while fewer than L - floor(reserve * L) slots are held.
   */
  reserve?: number
}

/** The validated `retries` option. */
export interface RetrySettings {
  /** Lowercase, as Node names incoming headers. */
  readonly header: string
  readonly reserve: number
}

export const DEFAULT_RETRY_HEADER = 'retry-attempt'
export const DEFAULT_RETRY_RESERVE = 0.1

const complain = AdmissionOptionError.complain
const SHAPE = { keys: ['header', 'reserve'], expected: '{ header?, reserve? }', nullPrototype: true, options: true }
// RFC 9110's token: the characters a field name may have.
const FIELD_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/

/** `retries`: true or absent (the defaults), false (off: no step in any plan), or `{ header?, reserve? }`. */
export function retriesOption (value: unknown): RetrySettings | undefined {
  if (value === false) return undefined
  if (value === undefined || value === true) return Object.freeze({ header: DEFAULT_RETRY_HEADER, reserve: DEFAULT_RETRY_RESERVE })
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new AdmissionOptionError('retries', 'a boolean, or an object { header?, reserve? }', value)
  const input = exactObject(complain, 'retries', value, SHAPE)
  const header = input.header === undefined ? DEFAULT_RETRY_HEADER : input.header
  if (typeof header !== 'string' || !FIELD_NAME.test(header)) throw new AdmissionOptionError('retries.header', 'a header name (1 to 64 letters, digits and !#$%&\'*+.^_`|~-)', header)
  const reserve = input.reserve === undefined ? DEFAULT_RETRY_RESERVE : numberInRange(complain, 'retries.reserve', input.reserve, 0, 1, 'a share of the in-flight limit, from 0 to below 1', true)
  return Object.freeze({ header: header.toLowerCase(), reserve })
}
