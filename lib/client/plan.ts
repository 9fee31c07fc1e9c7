import { fullJitter } from './backoff.js'
import { quotaBackAt, type ResponseHeaders } from './rate-limit-fields.js'
import { retryAfterTime } from './retry-after.js'

/** What a response says about its origin: holds until these times (ms since the epoch), each absent when not said. */
export interface OriginHolds {
  /** A 503 with `Retry-After`: the server is overloaded, every request to it waits (a pause). */
  readonly pauseUntil: number | undefined
  /** The `RateLimit` fields say nothing is left: requests wait for the reset (pacing). */
  readonly quotaUntil: number | undefined
}

/**
 * The holds a response puts on its origin. A time further than `maxWaitMs` from `receivedAt` is
 * not held: the client would rather pass such refusals on than stall every request for that long.
 */
export function originHolds (statusCode: number, headers: ResponseHeaders, receivedAt: number, maxWaitMs: number): OriginHolds {
  const within = (at: number | undefined): number | undefined => (at !== undefined && at - receivedAt <= maxWaitMs ? at : undefined)
  return {
    pauseUntil: statusCode === 503 ? within(retryAfterTime(headers['retry-after'], receivedAt)) : undefined,
    quotaUntil: within(quotaBackAt(headers, receivedAt))
  }
}

export interface RetryInput {
  readonly headers: ResponseHeaders
  readonly receivedAt: number
  /** The retry this would be: 1 for the first. */
  readonly retry: number
  /** The origin's hold (a pause or a spent quota), after this response's own. */
  readonly holdUntil: number
  readonly baseDelayMs: number
  readonly maxDelayMs: number
  readonly maxWaitMs: number
  /** A draw in [0, 1). */
  readonly random: number
}

export interface RetryTime {
  /** When the retry may be sent, ms since the epoch: never before any time the server advertised. */
  readonly at: number
  /** Whether the server set it (`Retry-After`, a pause, a spent quota) rather than the backoff. */
  readonly advertised: boolean
}

/**
 * When a refused request may be retried: at the time `Retry-After` names, or, when none is given,
 * after a fully jittered exponential backoff — in both cases no earlier than the origin's hold.
 * Undefined when the server asks for longer than `maxWaitMs`: that refusal is not retried.
 */
export function retryTime (input: RetryInput): RetryTime | undefined {
  const asked = retryAfterTime(input.headers['retry-after'], input.receivedAt)
  if (asked !== undefined && asked - input.receivedAt > input.maxWaitMs) return undefined
  const own = asked ?? input.receivedAt + fullJitter(input.retry, input.baseDelayMs, input.maxDelayMs, input.random)
  return own >= input.holdUntil ? { at: own, advertised: asked !== undefined } : { at: input.holdUntil, advertised: true }
}
