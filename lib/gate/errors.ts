export { AdmissionError, AdmissionOptionError } from '../validation/errors.js'
export { AdmissionCallbackError } from '../callbacks/callback-error.js'
import { AdmissionError } from '../validation/errors.js'
import { brandError } from '../validation/brand.js'
import { keepValue, show } from '../validation/show.js'

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
