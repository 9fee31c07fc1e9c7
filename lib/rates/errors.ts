import type { Policy } from '../core/rates/types.js'
import { complaintMessage, memberPath, type Complain } from '../validation/checks.js'
import { keepValue, show } from '../validation/show.js'
import { brandError, brandedInstance } from '../validation/brand.js'

/** The stable codes of the rates capability's own errors. */
export type RatesErrorCode =
  | 'RATES_INVALID_ARGUMENT'
  | 'RATES_POLICY_CONFLICT'
  | 'RATES_UNAVAILABLE'
  | 'RATES_STOPPED'

/**
 * Every error the rates capability throws or rejects with by its own decision. Handle them by
 * `code`, which is stable across versions; `name` is the concrete class's name. A denial is a
 * decision, never one of these.
 */
export abstract class RatesError extends Error {
  // Each class names itself: the bundle may rename a class (`class _X`), and `name` is `new.target.name`.
  static { brandError(this, 'RatesError') }
  /** An instance of this class of any copy of the package (its ESM and CommonJS builds): see `brandError`. */
  static override [Symbol.hasInstance] (value: unknown): boolean { return brandedInstance(this, value) }
  declare readonly code: RatesErrorCode
  protected constructor (code: RatesErrorCode, message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = new.target.name
    this.code = code
  }
}

/**
 * A policy, identity, cost or other argument that is not valid. `path` names the argument or field
 * (`policy.limit`, `identity[2]`, `identity.userId`, `cost`); `value` is what was given there (not
 * enumerable: an identity may come from a request, and no logger or JSON should copy it whole).
 *
 * The message reads "Expected `<subject>` to be <expected>, got <got>", where `subject` defaults
 * to `path` and `got` to the value as `show()` prints it.
 */
export class RatesInvalidArgumentError extends RatesError {
  static { brandError(this, 'RatesInvalidArgumentError') }
  declare readonly path: string
  declare readonly value: unknown
  constructor (path: string, expected: string, value: unknown, options: { subject?: string, got?: string } = {}) {
    super('RATES_INVALID_ARGUMENT', complaintMessage({ path, expected, value, ...options }))
    this.path = path
    keepValue(this, value)
  }

  /** The validation toolkit's complaints, as this error. */
  static readonly complain: Complain = ({ path, expected, value, subject, got }) =>
    new RatesInvalidArgumentError(path, expected, value, { ...(subject === undefined ? {} : { subject }), ...(got === undefined ? {} : { got }) })
}

/**
 * A limiter name already registered (in the same scope) with another normalized policy. The
 * limiter's name is `limiterName`: `name` is the error class's name, as for every error.
 */
export class RatesPolicyConflictError extends RatesError {
  static { brandError(this, 'RatesPolicyConflictError') }
  declare readonly limiterName: string
  /** The policy (or, for a stack, the policies) the quota has and the one asked for. */
  declare readonly existing: Readonly<Policy> | readonly Readonly<Policy>[]
  declare readonly requested: Readonly<Policy> | readonly Readonly<Policy>[]
  constructor (limiterName: string, existing: Readonly<Policy> | readonly Readonly<Policy>[], requested: Readonly<Policy> | readonly Readonly<Policy>[]) {
    super(
      'RATES_POLICY_CONFLICT',
      `Rate limiter ${JSON.stringify(limiterName)} already has the policy ${show(existing)}, got ${show(requested)}`
    )
    this.limiterName = limiterName
    this.existing = existing
    this.requested = requested
  }
}

/**
 * The backend cannot decide (full, unreachable, failed). Never a silent allow and never a denial.
 * `retryAfterMs`, when present, is the earliest time at which trying again can help; `cause` is the
 * underlying failure, when there is one. Both are own properties only when given.
 */
export class RatesUnavailableError extends RatesError {
  static { brandError(this, 'RatesUnavailableError') }
  declare readonly retryAfterMs?: number
  constructor (reason: string, options: { retryAfterMs?: number, cause?: unknown } = {}) {
    const retry = options.retryAfterMs === undefined ? '' : ` (retry after ${options.retryAfterMs} ms)`
    super('RATES_UNAVAILABLE', `The rates backend cannot decide: ${reason}${retry}`, 'cause' in options ? { cause: options.cause } : undefined)
    if (options.retryAfterMs !== undefined) this.retryAfterMs = options.retryAfterMs
  }
}

/**
 * A call on a limiter (or on the capability) after its Fastify instance closed or its backend was
 * replaced. Decisions already made stay made.
 */
export class RatesStoppedError extends RatesError {
  static { brandError(this, 'RatesStoppedError') }
  declare readonly limiterName?: string
  constructor (limiterName?: string) {
    super(
      'RATES_STOPPED',
      limiterName === undefined
        ? 'The rates capability has stopped (its Fastify instance closed or its backend was replaced)'
        : `Rate limiter ${JSON.stringify(limiterName)} has stopped (its Fastify instance closed or its backend was replaced)`
    )
    if (limiterName !== undefined) this.limiterName = limiterName
  }
}

export { memberPath }
