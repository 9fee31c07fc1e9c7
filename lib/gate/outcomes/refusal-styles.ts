import type { FastifyReply } from 'fastify'
import { isThenable, settleUnused, type Contained } from '../../callbacks/contained.js'
import { rejection503 } from '../../core/index.js'
import { AdmissionRefusalError } from '../errors.js'
import type { ErrorResponseBuilder } from '../options/error-response.js'
import type { PermitRecord } from '../release/permit-record.js'
import { inWords, MESSAGES, refusalText, type RefusalReason } from './refusal-text.js'

/**
 * Sends a refusal for a permit: the status, `Retry-After`, and a body in the route's style.
 * `violated`: the names of the policies that refused, as `RateLimit-Policy` lists them (none for
 * pressure and for a backend that could not decide: no policy of the client's was the cause).
 */
export type Refuse = (permit: PermitRecord, status: 429 | 503, retrySeconds: number, reason: RefusalReason, message: string, violated: readonly string[]) => void

const REASONS = { 429: 'Too Many Requests', 503: 'Service Unavailable' } as const

/** A built-in refusal's content: its type and body, from the status, the wait and the reason alone. */
export interface RefusalContent {
  readonly contentType: string
  readonly body: string
}

/** A built-in body style (`responseBody`). Every value is built from integers and constants: nothing from the request reaches a header or the body. */
export type BodyStyle = (status: 429 | 503, retrySeconds: number, reason: RefusalReason, message: string, violated: readonly string[]) => RefusalContent

/** The JSON body, as Fastify's own errors look. */
export const json: BodyStyle = (status, retrySeconds, _reason, message) => ({
  contentType: 'application/json; charset=utf-8',
  body: `{"statusCode":${status},"error":"${REASONS[status]}","message":"${refusalText(message, retrySeconds)}"}`
})

/** The core's plain-text refusal (`lim rejected`), with the status asked for. */
export const text: BodyStyle = (_status, retrySeconds) => {
  const plain = rejection503(retrySeconds)
  return { contentType: plain.headers['content-type'], body: plain.body }
}

// The problem types of the IETF httpapi-ratelimit-headers draft (registered in IANA's HTTP
// Problem Types registry), with the draft's titles.
const QUOTA_EXCEEDED = '{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Request cannot be satisfied as assigned quota has been exceeded"'
const REDUCED_CAPACITY = '{"type":"https://iana.org/assignments/http-problem-types#temporary-reduced-capacity","title":"Request cannot be satisfied due to temporary server capacity constraints"'

/**
 * An RFC 9457 `application/problem+json` refusal. A quota's refusal is `quota-exceeded`; a full gate,
 * pressure or a backend that cannot decide is `temporary-reduced-capacity` (the client's quota is not
 * the cause). `violated-policies` names the policies that refused, as `RateLimit-Policy` names them
 * (a tier's, a stack's exhausted ones, the in-flight limit's); it is left out when none did.
 * The names are validated keys (lowercase letters, digits, `_-.`): nothing in them needs escaping.
 */
export const problem: BodyStyle = (status, retrySeconds, reason, _message, violated) => {
  const detail = `"detail":"${refusalText(MESSAGES[reason], retrySeconds)}"`
  const policies = violated.length === 0 ? '' : `,"violated-policies":["${violated.join('","')}"]`
  return {
    contentType: 'application/problem+json; charset=utf-8',
    body: `${reason === 'limited' ? QUOTA_EXCEEDED : REDUCED_CAPACITY},"status":${status},${detail}${policies}}`
  }
}

/**
 * A built-in refusal sent through Fastify's reply: the application's `onSend` hooks see it (and
 * may change it); `onResponse` hooks and the request log see it as sent.
 */
export function throughReply (style: BodyStyle): Refuse {
  return (permit, status, retrySeconds, reason, message, violated) => {
    const content = style(status, retrySeconds, reason, message, violated)
    permit.reply
      .code(status)
      .header('retry-after', String(retrySeconds))
      .header('content-type', content.contentType)
      .send(content.body)
  }
}

/**
 * The application's `errorResponseBuilder`: its value is handed to Fastify as the request's error
 * (`toErrorHandling`), so the application's `setErrorHandler`, error serializers and `onError`
 * hooks see it, and `Retry-After` stays the gate's.
 * A builder that throws or returns no object is logged (at `error`, once for the route until it
 * works again: `contained`) and the request is refused in the `fallback` style instead — never
 * let through, never a 500.
 */
export function builder (build: ErrorResponseBuilder, fallback: Refuse, contained: Contained): Refuse {
  return (permit, status, retrySeconds, reason, message, violated) => {
    const failure = sendBuilt(build, permit, status, retrySeconds, reason, violated)
    if (failure === undefined) {
      contained.worked()
      return
    }
    contained.failed(failure)
    fallback(permit, status, retrySeconds, reason, message, violated)
  }
}

/** Why the builder's value cannot be used (it threw, or returned no object or a promise); undefined when it was sent. */
function sendBuilt (build: ErrorResponseBuilder, permit: PermitRecord, status: 429 | 503, retrySeconds: number, reason: RefusalReason, violated: readonly string[]): unknown {
  const gate = permit.gate
  let built: unknown
  try {
    built = build(permit.request, {
      statusCode: status,
      reason,
      retryAfterSeconds: retrySeconds,
      violatedPolicies: violated,
      policy: gate.policy,
      route: gate.name,
      max: gate.quota,
      ttl: retrySeconds * 1000,
      after: inWords(retrySeconds)
    })
  } catch (error) {
    return error
  }
  // Fastify takes a falsy error for "go on": the request would pass. A promise is no response.
  if (isThenable(built)) {
    settleUnused(built)
    return new TypeError('errorResponseBuilder returned a promise, not an object')
  }
  if (built === null || typeof built !== 'object') return new TypeError(`errorResponseBuilder returned ${built === null ? 'null' : `a ${typeof built}`}, not an object`)
  toErrorHandling(permit, status, retrySeconds, built)
  return undefined
}

/**
 * `responseBody: 'error'`: the refusal is an `AdmissionRefusalError` handed to Fastify's error
 * handling, as @fastify/rate-limit's 429 is — the application's `setErrorHandler` and `onError`
 * hooks see it (and may answer it their way: another body, a redirect); Fastify's default handler
 * answers `{ statusCode, code, error, message }`.
 */
export const throughErrors: Refuse = (permit, status, retrySeconds, reason, message) => {
  toErrorHandling(permit, status, retrySeconds, new AdmissionRefusalError(status, reason, retrySeconds, refusalText(message, retrySeconds)))
}

/**
 * Hands `error` to Fastify's error handling with the refusal's status on the error (its
 * `statusCode`), not on the reply: the application's error handler has its say first, as with
 * @fastify/rate-limit (a `reply.redirect('/')` there answers 302). A body the handler sends
 * without a status of its own (the reply still at 200) goes out with the refusal's status; a value
 * with no `statusCode` of 400–599 gets it on the reply at once, or Fastify's default handler would
 * answer 500. `Retry-After` is set first and again on every `send` of this reply (the error
 * handler's included), so neither the error's `headers` nor a handler can make it earlier than the gate's.
 */
function toErrorHandling (permit: PermitRecord, status: 429 | 503, retrySeconds: number, error: object): void {
  const retryAfter = String(retrySeconds)
  const reply = permit.reply
  const send = reply.send
  // The first send is Fastify's own, handing the error to its handlers; later ones are theirs.
  let dispatched = false
  reply.send = function admissionSendRefusal (this: FastifyReply, payload?: unknown) {
    this.header('retry-after', retryAfter)
    if (dispatched && this.statusCode === 200) this.code(status)
    dispatched = true
    return send.call(this, payload)
  }
  reply.header('retry-after', retryAfter)
  if (!carriesStatus(error)) reply.code(status)
  permit.done(error as Error)
}

/** Whether Fastify's default error handler takes the value's own status (a `statusCode` from 400 to 599). */
function carriesStatus (error: object): boolean {
  const statusCode = (error as { statusCode?: unknown }).statusCode
  return typeof statusCode === 'number' && statusCode >= 400 && statusCode <= 599
}
