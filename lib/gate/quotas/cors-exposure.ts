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
  if (reply.getHeader('access-control-allow-origin') === undefined) return
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
