import type { BodyStyle, Refuse } from './refusal-styles.js'

/** A refusal's bytes, made once per status, wait and message: the header block's fields and the body. */
interface Bytes {
  readonly head: Readonly<Record<string, string>>
  readonly body: Buffer
}

// Sheds have a handful of distinct answers (one per reason); a quota's 429 has one per second of
// its window. The first few made are kept; the rest are made for the one request (a table that
// grew with the window, or one cleared and refilled, would cost more than it saves).
const MOST_KEPT = 32

/**
 * A built-in refusal written straight onto Node's response, past Fastify's reply
 * (`reply.hijack()`): no serializer, no `onSend` hooks, no error handler — the least a refusal
 * needs, which is what a flood of them costs; a shed's bytes are made once. The response still
 * goes through Node's `ServerResponse`, so keep-alive and the order of pipelined responses hold,
 * and HTTP/2's compatibility layer writes it too. Headers set on the reply before the refusal
 * (CORS, a request id, the `RateLimit` fields) are sent with it. Fastify's `onResponse` hooks and
 * request log still see it (they follow the response, not the reply).
 */
export function rawRefusal (style: BodyStyle): Refuse {
  const kept = new Map<string, Bytes>()
  const make = (status: 429 | 503, retrySeconds: number, reason: Parameters<BodyStyle>[2], message: string, violated: readonly string[]): Bytes => {
    const content = style(status, retrySeconds, reason, message, violated)
    const body = Buffer.from(content.body)
    return { head: Object.freeze({ 'retry-after': String(retrySeconds), 'content-type': content.contentType, 'content-length': String(body.length) }), body }
  }
  return (permit, status, retrySeconds, reason, message, violated) => {
    const key = violated.length === 0 ? `${status} ${retrySeconds} ${message}` : `${status} ${retrySeconds} ${message} ${violated.join()}`
    let bytes = kept.get(key)
    if (bytes === undefined) {
      bytes = make(status, retrySeconds, reason, message, violated)
      if (kept.size < MOST_KEPT) kept.set(key, bytes)
    }
    const reply = permit.reply
    reply.hijack()
    const raw = reply.raw
    // A copy, the reply's own headers and those set on the raw response: ours to add to.
    const set = reply.getHeaders() as Record<string, unknown>
    for (const _name in set) {
      const head = bytes.head
      set['retry-after'] = head['retry-after']
      set['content-type'] = head['content-type']
      set['content-length'] = head['content-length']
      raw.writeHead(status, set as Record<string, string>)
      raw.end(bytes.body)
      return
    }
    raw.writeHead(status, bytes.head)
    raw.end(bytes.body)
  }
}
