import { types } from 'node:util'
import { AdmissionError } from '../validation/errors.js'
import { brandError } from '../validation/brand.js'
import { keepValue } from '../validation/show.js'

/**
 * The kind of every error that comes from an application callback answering what the gate cannot
 * use: `code` tells them apart. `ADMISSION_CALLBACK_FAILED` is a callback whose throw answers the
 * request with a 500 (`key`, `tier`, `allowList`) that threw something that is not an Error
 * (`throw undefined`, a string): this error takes its place, since Fastify takes a falsy error for
 * "go on" — the request would pass the gate — and sends a truthy one as the body. The gate's other
 * errors of this kind (a key, a tier, an allow-list answer, a charge it cannot use) are its
 * subclasses, each with its own code and message. `callback` names the callback (undefined when
 * the thrower is not known: a logger, a hook); `value` holds what it threw or returned, not
 * enumerable.
 */
export class AdmissionCallbackError extends AdmissionError {
  static { brandError(this, 'AdmissionCallbackError') }
  declare readonly callback: string | undefined
  declare readonly value: unknown
  /** A request the error fails is answered 500: the fault is the application's, not the client's. */
  readonly statusCode = 500
  constructor (callback: string | undefined, value: unknown, code = 'ADMISSION_CALLBACK_FAILED', message = notAnError(callback, value)) {
    super(code, message)
    this.callback = callback
    keepValue(this, value)
  }
}

function notAnError (callback: string | undefined, value: unknown): string {
  const what = value === undefined || value === null ? String(value) : `a ${typeof value}`
  return `${callback === undefined ? 'Code the gate called' : `The \`${callback}\` callback`} threw ${what}, not an Error`
}

/** What a callback threw, as the request's error: itself when it is an Error, else an `AdmissionCallbackError`. */
export function asError (callback: string | undefined, thrown: unknown): Error {
  return thrown instanceof Error || types.isNativeError(thrown) ? thrown as Error : new AdmissionCallbackError(callback, thrown)
}
