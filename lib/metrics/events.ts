import { channel, type Channel } from 'node:diagnostics_channel'
import type { FastifyRequest } from 'fastify'
import type { Contained } from '../callbacks/contained.js'
import type { Reason } from './reasons.js'

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
  /**
   * Why it was refused: which step refused it (`in-flight`, `quota:default`, `pressure:eventLoopDelay`…,
   * as `stats().reasons` counts them); undefined when admitted.
   */
  readonly reason: Reason | undefined
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

/**
 * Publishes a decision; callers check `decisions.hasSubscribers` first, so no event is built for
 * nobody. Each subscriber is called inside the route's error boundary (`subscribers`).
 */
export function publishDecision (subscribers: Contained, registration: string, request: FastifyRequest, route: string, outcome: AdmissionOutcome, reason: Reason | undefined,
  status: 429 | 503 | undefined, retryAfterSeconds: number | undefined, key: string | undefined, backendFailed: boolean): void {
  const event: AdmissionDecisionEvent = { registration, route, outcome, reason, status, retryAfterSeconds, key, backendFailed, request }
  deliver(decisions, event, subscribers)
}

type Subscriber = (message: unknown, name: string | symbol) => unknown

/**
 * Calls each subscriber of `channel` with `message`, as `channel.publish` does (in order, over the
 * list as it stood), but inside the boundary: `publish` catches a subscriber's throw only to throw
 * it again on the next tick as an uncaught exception, which ends the process, and leaves an async
 * subscriber's rejection unhandled. A failure is logged once for the route (`subscribers`): one
 * subscriber's success says nothing of another's. Node keeps the list as `_subscribers` (replaced,
 * not changed, when one subscribes or leaves); where it does not, `publish` delivers.
 */
export function deliver (channel: Channel, message: unknown, subscribers: Contained): void {
  const list = (channel as unknown as { _subscribers?: unknown })._subscribers
  if (!Array.isArray(list)) {
    channel.publish(message)
    return
  }
  const name = channel.name
  for (let i = 0; i < list.length; i++) {
    try {
      subscribers.watch((list[i] as Subscriber)(message, name))
    } catch (error) {
      subscribers.failed(error)
    }
  }
}

type LevelAware = { isLevelEnabled?: (level: string) => boolean }

/**
 * A refusal: logged at `debug` on the request's logger (its `reqId`, the route's `logLevel`),
 * then published when someone listens. The level is asked first so that a disabled `debug`
 * builds no log object; Fastify's null logger (no `logger` option) has no `isLevelEnabled` and
 * its `debug` does nothing.
 */
export function refused (subscribers: Contained, registration: string, request: FastifyRequest, route: string, outcome: Exclude<AdmissionOutcome, 'admitted'>, reason: Reason,
  status: 429 | 503, retryAfterSeconds: number, key: string | undefined, backendFailed: boolean): void {
  const log = request.log
  const levels = (log as unknown as LevelAware).isLevelEnabled
  if (levels === undefined || levels.call(log, 'debug')) {
    log.debug({ route, outcome, reason, status, retryAfterSeconds }, `fastify-admission: ${outcome} (${reason}), answered ${status} with Retry-After ${retryAfterSeconds}`)
  }
  if (decisions.hasSubscribers) publishDecision(subscribers, registration, request, route, outcome, reason, status, retryAfterSeconds, key, backendFailed)
}
