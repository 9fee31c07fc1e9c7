import { types } from 'node:util'
import { AdmissionError } from '../validation/errors.js'
import { brandError } from '../validation/brand.js'
import { keepValue } from '../validation/show.js'

/**
 * A callback whose throw answers the request with a 500 (`key`, `tier`, `allowList`) threw
 * something that is not an Error (`throw undefined`, a string): this error takes its place, since
 * Fastify takes a falsy error for "go on" — the request would pass the gate — and sends a truthy
 * one as the body. `callback` names it (undefined when the thrower is not known: a logger, a
 * hook); `value` holds what was thrown, not enumerable.
 */
export class AdmissionCallbackError extends AdmissionError {
  static { brandError(this, 'AdmissionCallbackError') }
  declare readonly callback: string | undefined
  declare readonly value: unknown
  readonly statusCode = 500
  constructor (callback: string | undefined, value: unknown) {
    const what = value === undefined || value === null ? String(value) : `a ${typeof value}`
    super('ADMISSION_CALLBACK_FAILED', `${callback === undefined ? 'Code the gate called' : `The \`${callback}\` callback`} threw ${what}, not an Error`)
    this.callback = callback
    keepValue(this, value)
  }
}

/** What a callback threw, as the request's error: itself when it is an Error, else an `AdmissionCallbackError`. */
export function asError (callback: string | undefined, thrown: unknown): Error {
  return thrown instanceof Error || types.isNativeError(thrown) ? thrown as Error : new AdmissionCallbackError(callback, thrown)
}
