/** Error code of a valid configuration. */
export const LIM_ERR_OK = 0
/** Error code of a configuration with a parameter that is not a positive integer. */
export const LIM_ERR_PARAM = 1

export type LimitErrorCode = typeof LIM_ERR_OK | typeof LIM_ERR_PARAM

/**
 * A limiter's configuration as a value: a bucket of `capacity` tokens that gains `refill` tokens
 * every `interval` ticks, and an in-flight gate of `maxInFlight` slots.
 */
export interface LimitConfig {
  readonly ok: boolean
  readonly err: LimitErrorCode
  readonly capacity: number
  readonly refill: number
  readonly interval: number
  readonly maxInFlight: number
}

// The seed's values are 64-bit integers; a fraction, NaN or an unsafe magnitude has no meaning
// there, so it is a parameter error like a value <= 0.
/** A positive safe integer: the one predicate behind every "positive integer" check of the package. */
export function isPositiveSafeInteger (value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value > 0
}

export function limitConfig (capacity: number, refill: number, interval: number, maxInFlight: number): LimitConfig {
  const ok = isPositiveSafeInteger(capacity) && isPositiveSafeInteger(refill) && isPositiveSafeInteger(interval) && isPositiveSafeInteger(maxInFlight)
  return { ok, err: ok ? LIM_ERR_OK : LIM_ERR_PARAM, capacity, refill, interval, maxInFlight }
}
