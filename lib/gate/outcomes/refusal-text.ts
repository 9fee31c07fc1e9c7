import type { RefusalReason } from '../errors.js'

export type { RefusalReason }

/** The refusal bodies' messages, by reason (built-in bodies only: nothing from the request). */
export const MESSAGES: Readonly<Record<RefusalReason, string>> = Object.freeze({
  limited: 'Rate limit exceeded',
  shed: 'Server is at capacity',
  unavailable: 'Service temporarily unavailable'
})

/** A wait in words, as every refusal says it: `1 second`, `30 seconds`. */
export function inWords (seconds: number): string {
  return `${seconds} second${seconds === 1 ? '' : 's'}`
}

/** A refusal's sentence: the reason's message and when to come back. */
export function refusalText (message: string, retrySeconds: number): string {
  return `${message}, retry in ${inWords(retrySeconds)}`
}

/** `Retry-After` of a wait in milliseconds: whole seconds, rounded up, at least 1. */
export function retrySeconds (retryAfterMs: number): number {
  return Math.max(1, Math.ceil(retryAfterMs / 1000))
}

/**
 * Marks a reply the gate refused — by any registration of this package, in any copy of it — so
 * that login throttling never takes another registration's 429 or 503 for a failed login.
 */
export const kGateRefusal = Symbol.for('fastify-admission.refusal')

/** Whether a registration of this package refused the request this reply answers. */
export function refusedByGate (reply: object): boolean {
  return (reply as Record<symbol, unknown>)[kGateRefusal] === true
}
