import type { FastifyReply } from 'fastify'

/** Why the gate refuses a request. */
export type RefusalReason = 'limited' | 'shed' | 'unavailable'

/** The refusal bodies' messages, by reason (built-in bodies only: nothing from the request). */
export const MESSAGES: Readonly<Record<RefusalReason, string>> = Object.freeze({
  limited: 'Rate limit exceeded',
  shed: 'Server is at capacity',
  unavailable: 'Service temporarily unavailable'
})

// The problem types of the IETF httpapi-ratelimit-headers draft (registered in IANA's HTTP
// Problem Types registry), with the draft's titles.
const QUOTA_EXCEEDED = '{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Request cannot be satisfied as assigned quota has been exceeded"'
const REDUCED_CAPACITY = '{"type":"https://iana.org/assignments/http-problem-types#temporary-reduced-capacity","title":"Request cannot be satisfied due to temporary server capacity constraints"'

/**
 * An RFC 9457 `application/problem+json` refusal. A quota's refusal is `quota-exceeded`, naming the
 * policy it violated (`"default"`, as `RateLimit-Policy` names it); a full gate or a backend that
 * cannot decide is `temporary-reduced-capacity` (the client's quota is not the cause). Built from
 * integers and constants only, as the other bodies.
 */
export function refuseProblem (reply: FastifyReply, status: 429 | 503, retrySeconds: number, reason: RefusalReason): void {
  const detail = `"detail":"${MESSAGES[reason]}, retry in ${retrySeconds} second${retrySeconds === 1 ? '' : 's'}"`
  reply
    .code(status)
    .header('retry-after', String(retrySeconds))
    .header('content-type', 'application/problem+json; charset=utf-8')
    .send(reason === 'limited'
      ? `${QUOTA_EXCEEDED},"status":${status},${detail},"violated-policies":["default"]}`
      : `${REDUCED_CAPACITY},"status":${status},${detail}}`)
}
