export { AdmissionError, AdmissionOptionError } from '../validation/errors.js'
import { AdmissionCallbackError } from '../callbacks/callback-error.js'
import { AdmissionError } from '../validation/errors.js'
import { brandError } from '../validation/brand.js'
import { show } from '../validation/show.js'

/** Why the gate refuses a request. */
export type RefusalReason = 'limited' | 'shed' | 'unavailable'

export { show, AdmissionCallbackError }

// Every error class of the plugin, held or re-exported here, in four kinds told apart by `code`:
// `AdmissionOptionError` (an option or a route's config is not valid), `AdmissionCallbackError`
// (an application callback answered what the gate cannot use), `AdmissionRefusalError` (a refusal,
// handed to the error handler) and `AdmissionError` itself (the base, and a registration's layout
// mistakes). The base and the option errors are defined below the gate (pressure and metrics
// throw them too), the callback kind beside `asError`, which makes it.

/**
 * The `key(request)` option returned something that is not a key: not a string, or longer than
 * the bound. The message says what was wrong, never the value itself (which may come from the
 * request, and Fastify may show the message in a 500); `value` holds it for an error handler, not
 * enumerable, so that no logger or JSON copies it (a key can be a secret, and megabytes long).
 */
export class AdmissionKeyError extends AdmissionCallbackError {
  static { brandError(this, 'AdmissionKeyError') }
  constructor (value: unknown, got: string) {
    super('key', value, 'ADMISSION_INVALID_KEY', `Expected the \`key\` option to return a string of at most 1024 UTF-8 bytes, got ${got}`)
  }
}

/**
 * The `allowList` function returned a promise (or another thenable): a synchronous answer is
 * needed before the request may go on, and a promise is always truthy, so it is not taken for a
 * yes. The message never shows the value; `value` holds it (not enumerable, as every error's `value`).
 */
export class AdmissionAllowListError extends AdmissionCallbackError {
  static { brandError(this, 'AdmissionAllowListError') }
  constructor (value: unknown) {
    super('allowList', value, 'ADMISSION_INVALID_ALLOW_LIST_RESULT', 'Expected the `allowList` function to return a boolean synchronously, got a promise (or another thenable)')
  }
}

/**
 * The `tier(request)` of a tiered `rateLimit` named no declared tier. The message lists the
 * declared names and never shows the value (it may come from the request); `value` holds it, not
 * enumerable (as every error's `value`): no logger or JSON copies it.
 */
export class AdmissionTierError extends AdmissionCallbackError {
  static { brandError(this, 'AdmissionTierError') }
  constructor (value: unknown, tiers: readonly string[]) {
    super('tier', value, 'ADMISSION_UNKNOWN_TIER', `Expected the \`tier\` function to return one of ${tiers.map((t) => JSON.stringify(t)).join(', ')}, got ${typeof value === 'string' ? 'another name' : value === undefined || value === null ? String(value) : `a ${typeof value}`}`)
  }
}

/**
 * A route's `charge(request, reply)` returned no amount the gate can charge: not a safe integer
 * from 0 to the route's capacity. Logged (once until the next good amount), never thrown at a
 * client: the response is already sent. The message shows the value short (`show()`, at most
 * one line); `value` holds it whole, not enumerable.
 */
export class AdmissionChargeError extends AdmissionCallbackError {
  static { brandError(this, 'AdmissionChargeError') }
  constructor (route: string, value: unknown, capacity: number) {
    super('charge', value, 'ADMISSION_INVALID_CHARGE', `Expected config.admission.charge of ${route} to return a safe integer from 0 to ${capacity} (the units the request took; its quota's capacity), got ${show(value)}`)
  }
}

/**
 * Routes that ask for a gate no registration gives: a route whose `config.admission` is an
 * object, declared in a context no registration encloses (a sibling of the one the plugin was
 * registered in), would run ungated without a word. A mistake of the application's layout, found
 * at `ready()`: of the base kind, as a second registration in one context is.
 */
export class AdmissionScopeError extends AdmissionError {
  static { brandError(this, 'AdmissionScopeError') }
  declare readonly routes: readonly string[]
  constructor (routes: readonly string[]) {
    const one = routes.length === 1
    super('ADMISSION_UNGATED_ROUTE', `${routes.join(', ')} ${one ? 'has' : 'have'} config.admission, but no registration of fastify-admission encloses ${one ? 'it' : 'them'}: register the plugin in a context that contains ${one ? 'the route' : 'these routes'} (at the root, with \`await app.register(admission)\`), or declare ${one ? 'it' : 'them'} inside the context where the plugin is registered`)
    this.routes = routes
  }
}

/** The stable `code` of a refusal, by why the gate refused. */
const REFUSAL_CODES = { limited: 'ADMISSION_LIMITED', shed: 'ADMISSION_SHED', unavailable: 'ADMISSION_UNAVAILABLE' } as const

/**
 * A refusal of the gate, handed to Fastify's error handling (`refusal: 'error'`): the
 * application's `setErrorHandler` and `onError` hooks see it, and Fastify's default handler
 * answers it as any error with a `statusCode`. `Retry-After` (and the `RateLimit` fields) stay
 * the gate's whatever the handler sends. Built from integers and constants only: nothing from
 * the request is in it.
 */
export class AdmissionRefusalError extends AdmissionError {
  static { Object.defineProperty(this, 'name', { value: 'AdmissionRefusalError' }) }
  declare readonly code: typeof REFUSAL_CODES[RefusalReason]
  /** 429 for a quota (or `refusal.limitStatusCode`), 503 for a full gate, pressure or a backend that cannot decide. */
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
