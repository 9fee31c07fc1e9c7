import type { FastifyReply } from 'fastify'

/** What a browser's code needs to read of the gate's answer: when to come back, and what is left. */
const EXPOSED = ['Retry-After', 'RateLimit', 'RateLimit-Policy'] as const
const EXPOSED_LIST = EXPOSED.join(', ')

/**
 * A cross-origin response (it carries `Access-Control-Allow-Origin`, from @fastify/cors or the
 * application) exposes `Retry-After` and the `RateLimit` fields to the page's code: a browser
 * hides every response header but a few unless `Access-Control-Expose-Headers` names it. Names
 * already exposed stay, once each; `*` already exposes them to a request without credentials.
 */
export function exposeToBrowsers (reply: FastifyReply): void {
  if (allowedOrigin(reply) === undefined) return
  const current = reply.getHeader('access-control-expose-headers')
  if (current === undefined) {
    reply.header('access-control-expose-headers', EXPOSED_LIST)
    return
  }
  const list = Array.isArray(current) ? current.join(', ') : String(current)
  const have = new Set(list.split(',').map((name) => name.trim().toLowerCase()))
  if (have.has('*') && reply.getHeader('access-control-allow-credentials') !== 'true') return
  const missing = EXPOSED.filter((name) => !have.has(name.toLowerCase()))
  if (missing.length !== 0) reply.header('access-control-expose-headers', `${list}, ${missing.join(', ')}`)
}

// Fastify keeps the headers set on a reply (`reply.header()`, as @fastify/cors sets them) in an object
// under its symbol `fastify.reply.headers`: read there, the check costs a property load on every
// admission with fields, where `reply.getHeader()` lowercases the name twice and asks Node's
// response too. Found on the first reply; a reply without it (another copy of Fastify) is asked
// through `getHeader`, as is a header set on the raw response.
let kReplyHeaders: symbol | undefined

/** The reply's `Access-Control-Allow-Origin`, or undefined. */
export function allowedOrigin (reply: FastifyReply): unknown {
  kReplyHeaders ??= Object.getOwnPropertySymbols(reply).find((symbol) => symbol.description === 'fastify.reply.headers')
  const headers = kReplyHeaders === undefined ? undefined : (reply as unknown as Record<symbol, Record<string, unknown> | undefined>)[kReplyHeaders]
  if (headers === undefined) return reply.getHeader('access-control-allow-origin')
  return headers['access-control-allow-origin'] ?? reply.raw.getHeader('access-control-allow-origin')
}
