import type { FastifyRequest } from 'fastify'
import type { Policy } from '../../core/rates/types.js'
import { optionalFunction } from '../../validation/checks.js'
import { AdmissionOptionError } from '../errors.js'
import type { RefusalReason } from '../errors.js'

/** What `errorResponseBuilder` is told about a refusal. */
export interface AdmissionRefusalContext {
  /** The status the refusal has unless the value built says otherwise (`statusCode`, as with @fastify/rate-limit). */
  readonly statusCode: 429 | 503
  /** `limited`: the client's quota is empty; `shed`: an in-flight gate is full; `unavailable`: the backend could not decide. */
  readonly reason: RefusalReason
  /** What `Retry-After` says, whatever the builder returns. */
  readonly retryAfterSeconds: number
  /**
   * The policies that refused, as `RateLimit-Policy` names them (`default`, a tier's, a stack's
   * exhausted ones, `in-flight` or `route-in-flight` for a full gate); empty for pressure and for a
   * backend that could not decide. A problem body's `violated-policies`.
   */
  readonly violatedPolicies: readonly string[]
  /** The route's rate-limit policy (normalized), or undefined when it has none. */
  readonly policy: Readonly<Policy> | undefined
  /** The route, as `stats().routes` names it (`404` for requests that matched none). */
  readonly route: string
  /** @fastify/rate-limit's `max`: the quota's capacity (`q` of `RateLimit-Policy`), 0 without a policy. */
  readonly max: number
  /** @fastify/rate-limit's `ttl`: `retryAfterSeconds` in milliseconds. */
  readonly ttl: number
  /** @fastify/rate-limit's `after`: `retryAfterSeconds` in words (`1 second`, `30 seconds`). */
  readonly after: string
}

/**
 * Builds the refusal's body, as @fastify/rate-limit's option of that name: its result is handed
 * to Fastify as the request's error, so the application's `setErrorHandler`, error serializers and
 * `onError` hooks see it (Fastify's default handler sends a plain object as its JSON and takes its
 * `statusCode`). It must return an object (an `Error` or a plain object), synchronously.
 */
export type ErrorResponseBuilder = (request: FastifyRequest, context: AdmissionRefusalContext) => object

/** The option, checked once: a synchronous function, or absent. */
export function builderOption (path: string, value: unknown): ErrorResponseBuilder | undefined {
  const builder = optionalFunction<ErrorResponseBuilder>(AdmissionOptionError.complain, path, value, 'a function (request, context) => object')
  if (builder !== undefined && Object.prototype.toString.call(builder) === '[object AsyncFunction]') {
    throw new AdmissionOptionError(path, 'a synchronous function (request, context) => object (an async function returns a promise, which is not a response)', value)
  }
  return builder
}
