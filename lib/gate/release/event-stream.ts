import type { FastifyReply } from 'fastify'

const EVENT_STREAM = /^\s*text\/event-stream/i
const EVENT_STREAM_HEAD = /\r\ncontent-type:[ \t]*text\/event-stream/i

/**
 * Whether the reply's headers, sent or set for a stream being piped, announce an event stream:
 * Fastify's headers and those set on the response (HTTP/1 and HTTP/2), else the head Node wrote
 * from `writeHead(status, headers)` (HTTP/1 keeps those only there).
 */
export function eventStreamSent (reply: FastifyReply): boolean {
  const type = reply.getHeader('content-type')
  if (typeof type === 'string') return EVENT_STREAM.test(type)
  const head = (reply.raw as unknown as { _header?: unknown })._header
  return typeof head === 'string' && EVENT_STREAM_HEAD.test(head)
}
