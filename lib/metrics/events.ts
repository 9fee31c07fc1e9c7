import { channel } from 'node:diagnostics_channel'
import type { FastifyRequest } from 'fastify'

/** The `node:diagnostics_channel` name every gate decision is published on. */
export const DECISION_CHANNEL = 'fastify-admission:decision'

/** How the gate answered a request; the same words as `fastify_admission_requests_total`'s `outcome`. */
export type AdmissionOutcome = 'admitted' | 'limited' | 'shed' | 'unavailable'

/** One decision of the gate, as published on `fastify-admission:decision`. */
export interface AdmissionDecisionEvent {
  /** The registration's address (`app`, `app/child@%2Fapi`…), as `fastify.admission.address`. */
  readonly registration: string
  /** `METHOD /url` as in `stats().routes`, or `404`. */
  readonly route: string
  /**
   * `unavailable`: refused because the backend could not decide (`onBackendError: 'deny'`); a
   * request admitted by `onBackendError: 'allow'` is `admitted` with `backendFailed: true`.
   */
  readonly outcome: AdmissionOutcome
  /** The refusal's status (429 or 503); undefined when admitted. */
  readonly status: 429 | 503 | undefined
  /** The refusal's `Retry-After`; undefined when admitted. */
  readonly retryAfterSeconds: number | undefined
  /**
   * The client's key as the quota saw it (after IPv6 grouping), when a quota decided or failed to;
   * undefined for a shed request (it reaches no quota) and on routes without a rate limit.
   * Subscribers run in this process, with the trust of the `key` option itself; metrics never carry it.
   */
  readonly key: string | undefined
  /** The backend could not decide for this request. */
  readonly backendFailed: boolean
  readonly request: FastifyRequest
}

/**
 * The channel object, made once: `decisions.hasSubscribers` is the one property read a decision
 * pays when nobody listens. Channels are global by name, so a subscriber in another copy of this
 * package (its CommonJS build beside the ESM one) hears every copy.
 */
export const decisions = channel(DECISION_CHANNEL)

/** Publishes a decision; callers check `decisions.hasSubscribers` first, so no event is built for nobody. */
export function publishDecision (registration: string, request: FastifyRequest, route: string, outcome: AdmissionOutcome,
  status: 429 | 503 | undefined, retryAfterSeconds: number | undefined, key: string | undefined, backendFailed: boolean): void {
  const event: AdmissionDecisionEvent = { registration, route, outcome, status, retryAfterSeconds, key, backendFailed, request }
  decisions.publish(event)
}

type LevelAware = { isLevelEnabled?: (level: string) => boolean }

/**
 * A refusal: logged at `debug` on the request's logger (its `reqId`, the route's `logLevel`),
 * then published when someone listens. The level is asked first so that a disabled `debug`
 * builds no log object; Fastify's null logger (no `logger` option) has no `isLevelEnabled` and
 * its `debug` does nothing.
 */
export function refused (registration: string, request: FastifyRequest, route: string, outcome: Exclude<AdmissionOutcome, 'admitted'>,
  status: 429 | 503, retryAfterSeconds: number, key: string | undefined, backendFailed: boolean): void {
  const log = request.log
  const levels = (log as unknown as LevelAware).isLevelEnabled
  if (levels === undefined || levels.call(log, 'debug')) {
    log.debug({ route, outcome, status, retryAfterSeconds }, `fastify-admission: ${outcome}, answered ${status} with Retry-After ${retryAfterSeconds}`)
  }
  if (decisions.hasSubscribers) publishDecision(registration, request, route, outcome, status, retryAfterSeconds, key, backendFailed)
}
