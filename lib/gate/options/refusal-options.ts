import { exactObject } from '../../validation/checks.js'
import { AdmissionOptionError } from '../errors.js'

/** A built-in refusal's body: JSON, 12 bytes of text, an RFC 9457 problem, or an error for Fastify's error handling. */
export type RefusalBody = 'json' | 'text' | 'problem' | 'error'

/**
 * `refusal`: how the gate writes its built-in refusals (a refusal of the application's own is its
 * `errorResponseBuilder`). A body alone (`refusal: 'problem'`), or an object: `body`,
 * `limitStatusCode` (the status of a quota's refusal) and `fast` (which refusals are written from
 * precomputed bytes).
 */
export interface RefusalOptions {
  /**
   * `'json'` (the default: `{ statusCode, error, message }`), `'text'` (`lim rejected`, 12 bytes),
   * `'problem'` (RFC 9457 `application/problem+json` with the RateLimit draft's problem types) or
   * `'error'`: an `AdmissionRefusalError` handed to Fastify's error handling (`setErrorHandler`,
   * `onError`), as @fastify/rate-limit does (then no refusal is written from bytes).
   */
  body?: RefusalBody
  /** Status of a rate-limited request: 429 (the default) or 503. */
  limitStatusCode?: 429 | 503
  /**
   * Which built-in refusals are written from precomputed bytes on the raw response, past Fastify's
   * reply (no serializer, `onSend` hook or error handler runs for them; `onResponse` hooks and the
   * request log still see them): `'shed'` (the default: the 503s of a full gate, queueing delay and
   * pressure — under a flood these are the work), `'all'` (rate-limit refusals and the backend's
   * 503 too) or `false` (every refusal through Fastify's reply; the default with `body: 'error'`).
   * A route with an `errorResponseBuilder` always refuses through it.
   */
  fast?: 'shed' | 'all' | false
}

/** The refusal's settings, under the names the gate reads them by. */
export interface RefusalSettings {
  readonly limitStatusCode: 429 | 503
  readonly responseBody: RefusalBody
  readonly fastRefusals: 'shed' | 'all' | false
}

const complain = AdmissionOptionError.complain
const BODIES = "'json', 'text', 'problem' or 'error'"
const SHAPE = { keys: ['body', 'limitStatusCode', 'fast'], expected: `${BODIES}, or an object { body?, limitStatusCode?, fast? }`, nullPrototype: true, options: true }

function bodyOption (path: string, value: unknown): RefusalBody {
  if (value === undefined) return 'json'
  if (value !== 'json' && value !== 'text' && value !== 'problem' && value !== 'error') throw new AdmissionOptionError(path, BODIES, value)
  return value
}

/** The plugin's `refusal`, checked once. */
export function refusalOption (value: unknown): RefusalSettings {
  const input = typeof value === 'string' ? { body: value } : value === undefined ? {} : exactObject(complain, 'refusal', value, SHAPE)
  const responseBody = bodyOption(typeof value === 'string' ? 'refusal' : 'refusal.body', input.body)
  const limitStatusCode = input.limitStatusCode === undefined ? 429 : input.limitStatusCode
  if (limitStatusCode !== 429 && limitStatusCode !== 503) throw new AdmissionOptionError('refusal.limitStatusCode', '429 or 503', limitStatusCode)
  const fastRefusals = input.fast === undefined ? (responseBody === 'error' ? false : 'shed') : input.fast
  if (fastRefusals !== 'shed' && fastRefusals !== 'all' && fastRefusals !== false) throw new AdmissionOptionError('refusal.fast', "'shed' (the default), 'all' or false", fastRefusals)
  if (responseBody === 'error' && fastRefusals !== false) throw new AdmissionOptionError('refusal.fast', "false or unset with body: 'error' (a refusal handed to the error handler is not written from bytes)", fastRefusals)
  return { limitStatusCode, responseBody, fastRefusals }
}
