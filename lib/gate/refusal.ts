import type { FastifyReply } from 'fastify'
import { rejection503 } from '../core/index.js'

const REASONS = { 429: 'Too Many Requests', 503: 'Service Unavailable' } as const

/**
 * Sends a refusal. Every value is built from integers and constants: nothing from the request
 * reaches a header or the body. `'text'` with 503 is the seed's v1 wire format byte for byte.
 */
export function refuse (reply: FastifyReply, status: 429 | 503, retrySeconds: number, body: 'json' | 'text', message: string): void {
  if (body === 'text') {
    const v1 = rejection503(retrySeconds)
    reply.code(status).headers(v1.headers).send(v1.body)
    return
  }
  reply
    .code(status)
    .header('retry-after', String(retrySeconds))
    .header('content-type', 'application/json; charset=utf-8')
    .send(`{"statusCode":${status},"error":"${REASONS[status]}","message":"${message}, retry in ${retrySeconds} second${retrySeconds === 1 ? '' : 's'}"}`)
}
