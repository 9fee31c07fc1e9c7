export { AdmissionError, AdmissionOptionError } from '../validation/errors.js'
export { AdmissionCallbackError } from '../callbacks/callback-error.js'
import { AdmissionError } from '../validation/errors.js'
import { brandError } from '../validation/brand.js'
import { keepValue, show } from '../validation/show.js'
import type { RefusalReason } from './outcomes/refusal-text.js'

export { show }

/**
 * The `key(request)` option returned something that is not a key: not a string, or longer than
 * the bound. The message says what was wrong, never the value itself (which may come from the
 * request, and Fastify may show the message in a 500); `value` holds it for an error handler, not
 * enumerable, so that no logger or JSON copies it (a key can be a secret, and megabytes long).
 */
export class AdmissionKeyError extends AdmissionError {
  static { brandError(this, 'AdmissionKeyError') }
  declare readonly value: unknown
  readonly statusCode = 500
  constructor (value: unknown, got: string) {
    super('ADMISSION_INVALID_KEY', `Expected the \`key\` option to return a string of at most 1024 UTF-8 bytes, got ${got}`)
    keepValue(this, value)
  }
}

/**
 * The `allowList` function returned a promise (or another thenable): a synchronous answer is
 * needed before the request may go on, and a promise is always truthy, so it is not taken for a
 * yes. The message never shows the value; `value` holds it (not enumerable, as every error's `value`).
 */
export class AdmissionAllowListError extends AdmissionError {
  static { brandError(this, 'AdmissionAllowListError') }
  declare readonly value: unknown
  readonly statusCode = 500
  constructor (value: unknown) {
    super('ADMISSION_INVALID_ALLOW_LIST_RESULT', 'Expected the `allowList` function to return a boolean synchronously, got a promise (or another thenable)')
    keepValue(this, value)
  }
}

/**
 * The `tier(request)` of a tiered `rateLimit` named no declared tier. The message lists the
 * declared names and never shows the value (it may come from the request); `value` holds it, not
 * enumerable (as every error's `value`): no logger or JSON copies it.
 */
export class AdmissionTierError extends AdmissionError {
  static { brandError(this, 'AdmissionTierError') }
  declare readonly value: unknown
  readonly statusCode = 500
  constructor (value: unknown, tiers: readonly string[]) {
    super('ADMISSION_UNKNOWN_TIER', `Expected the \`tier\` function to return one of ${tiers.map((t) => JSON.stringify(t)).join(', ')}, got ${typeof value === 'string' ? 'another name' : value === undefined || value === null ? String(value) : `a ${typeof value}`}`)
    keepValue(this, value)
  }
}

/**
 * A route's `charge(request, reply)` returned no amount the gate can charge: not a safe integer
 * from 0 to the route's capacity. Logged (once until the next good amount), never thrown at a
 * client: the response is already sent. The message shows the value short (`show()`, at most
 * one line); `value` holds it whole, not enumerable.
 */
export class AdmissionChargeError extends AdmissionError {
  static { brandError(this, 'AdmissionChargeError') }
  declare readonly value: unknown
  constructor (route: string, value: unknown, capacity: number) {
    super('ADMISSION_INVALID_CHARGE', `Expected config.admission.charge of ${route} to return a safe integer from 0 to ${capacity} (the units the request took; its quota's capacity), got ${show(value)}`)
    keepValue(this, value)
  }
}

/** The stable `code` of a refusal, by why the gate refused. */
const REFUSAL_CODES = { limited: 'ADMISSION_LIMITED', shed: 'ADMISSION_SHED', unavailable: 'ADMISSION_UNAVAILABLE' } as const

/**
 * A refusal of the gate, handed to Fastify's error handling (`responseBody: 'error'`): the
 * application's `setErrorHandler` and `onError` hooks see it, and Fastify's default handler
 * answers it as any error with a `statusCode`. `Retry-After` (and the `RateLimit` fields) stay
 * the gate's whatever the handler sends. Built from integers and constants only: nothing from
 * the request is in it.
 */
export class AdmissionRefusalError extends AdmissionError {
  static { Object.defineProperty(this, 'name', { value: 'AdmissionRefusalError' }) }
  declare readonly code: typeof REFUSAL_CODES[RefusalReason]
  /** 429 for a quota (or `limitStatusCode`), 503 for a full gate, pressure or a backend that cannot decide. */
  readonly statusCode: 429 | 503
  readonly reason: RefusalReason
  /** The `Retry-After` sent with it, in seconds. */
  readonly retryAfterSeconds: number
  constructor (statusCode: 429 | 503, reason: RefusalReason, retryAfterSeconds: number, message: string) {
    // A refusal is an answer, not a fault: no stack frames (capturing them was most of its cost).
    const frames = Error.stackTraceLimit
    Error.stackTraceLimit = 0
    try {
      super(REFUSAL_CODES[reason], message)
    } finally {
      Error.stackTraceLimit = frames
    }
    this.statusCode = statusCode
    this.reason = reason
    this.retryAfterSeconds = retryAfterSeconds
  }
}
