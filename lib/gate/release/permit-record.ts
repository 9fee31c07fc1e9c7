import type { FastifyReply, FastifyRequest } from 'fastify'
import type { RateDecision } from '../../rates/decision.js'
import type { RouteGate } from '../route-gate.js'

/** How a permit ended: its response was written, its client went away, the gate refused it, Fastify's handler timeout answered for it, or its long-lived phase began. */
export type PermitEnd = 'responded' | 'aborted' | 'refused' | 'timedOut' | 'longLived'

/** Fastify's hook callback: go on, or answer with the error. */
export type Done = (error?: Error) => void

/**
 * What the plan's steps decided for one request, as they leave it for the next step, the headers,
 * the verdict and the recorder: the client's key, the quota's answer, how the permit ended.
 */
export interface PermitRecord {
  readonly request: FastifyRequest
  readonly reply: FastifyReply
  /** The route's gate: its counters and its in-flight slots. */
  readonly route: RouteGate
  /** The gate whose quota decides (the route's, or its tier's). */
  gate: RouteGate
  /** Fastify's callback for the hook now running (`onRequest`, then `preHandler` when the check runs there). */
  done: Done
  /** The client's key, once the key step made it. */
  key: string | undefined
  /** The quota's answer, as the decision step left it for the headers and the verdict. */
  admitted: boolean
  retryAfterMs: number
  /** When its quota decided, on the quota's clock (routes that charge after the response only; undefined when not known). */
  decidedAt: number | undefined
  /** A remote decision (its numbers for the headers). */
  decision: RateDecision | undefined
  /** The backend could not decide and the request was admitted anyway (`onBackendError: 'allow'`, or not enforcing). */
  backendFailed: boolean
  /** The request says it is a retry (its attempt header, on a route with `retries`). */
  retry: boolean
  /** How the permit ended; undefined while it is live. */
  readonly how: PermitEnd | undefined
}
