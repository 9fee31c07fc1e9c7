import type { FastifyReply } from 'fastify'
import type { GateCounters } from '../../metrics/counters.js'
import { eventStreamSent } from './event-stream.js'
import type { Permit } from './permit.js'

/**
 * How a route's requests become long-lived, known from its declaration: `upgrade`, a websocket
 * route's upgrade requests (@fastify/websocket's `websocket: true` or `wsHandler`), long-lived once
 * the handler takes the connection over (`reply.hijack()`); `stream`, a route that streams events
 * (@fastify/sse's `sse`), long-lived once a `text/event-stream` reply's headers are out; `marked`,
 * a route the application marks (`config.admission.longLived: true`), long-lived once any
 * successful reply's headers are out.
 */
export type LongLivedKind = 'upgrade' | 'stream' | 'marked'

type Connection = { once (event: 'close', listener: () => void): unknown, removeListener (event: 'close', listener: () => void): unknown, closed?: boolean }

/**
 * The registration's long-lived connections: websockets, event streams and the replies the
 * application marks. A request's in-flight permit covers its work; once its long-lived phase
 * begins the permit ends (`Permit.becameLongLived`) and its connection is counted here instead,
 * until it closes — so open streams never take from the API's in-flight limit, and the adaptive
 * limit never reads a stream's life as latency.
 *
 * A request to a route known to be long-lived takes its place here at admission (`take`), against
 * `maxLongLived` (the registration's, 0 for none) and the route's own: a full one is refused with a
 * 503 of its own. A stream found on another route (its headers out when its handler returned) is
 * counted from then on, against no bound: only a declared route can be refused before it starts.
 */
export class LongLivedConnections {
  readonly global: GateCounters
  /** At most this many at once over the registration; 0 for no bound. */
  readonly limit: number

  constructor (global: GateCounters, limit: number) {
    this.global = global
    this.limit = limit
  }

  /** A place for a request that will be long-lived; false when the registration's or the route's bound is reached. */
  take (permit: Permit): boolean {
    const route = permit.route
    if (this.limit !== 0 && this.global.longLived >= this.limit) return false
    if (route.maxLongLived !== 0 && route.counters.longLived >= route.maxLongLived) return false
    this.global.longLived++
    route.counters.longLived++
    permit.longLived = true
    return true
  }

  /** The request's long-lived phase begins: counted (if it took no place before) until its connection closes. */
  opened (permit: Permit): void {
    if (!permit.longLived) {
      this.global.longLived++
      permit.route.counters.longLived++
      permit.longLived = true
    }
    const raw = permit.request.raw as unknown as { httpVersionMajor: number, socket: Connection, stream: Connection }
    const connection = raw.httpVersionMajor === 2 ? raw.stream : raw.socket
    // Gone already (the client left while the handler awaited, before it wrote the headers).
    if (connection.closed === true) {
      this.close(permit)
      return
    }
    const response = permit.reply.raw as unknown as Connection
    // The response closes when it ends or its connection does; a response queued behind pipelined
    // ones never emits it, its connection does.
    const closed = (): void => {
      response.removeListener('close', closed)
      connection.removeListener('close', closed)
      this.close(permit)
    }
    response.once('close', closed)
    connection.once('close', closed)
  }

  /** The request's place goes back: its connection closed, or it ended without becoming long-lived. */
  close (permit: Permit): void {
    if (!permit.longLived) return
    permit.longLived = false
    this.global.longLived--
    permit.route.counters.longLived--
  }
}

/** Watches the reply of a request to a long-lived route for the moment its long-lived phase begins. */
export function watchLongLived (permit: Permit, kind: LongLivedKind): void {
  if (kind === 'upgrade') watchUpgrade(permit)
  else watchHeaders(permit, kind)
}

/** The upgrade begins when the handler takes the connection over. */
function watchUpgrade (permit: Permit): void {
  const reply = permit.reply
  const hijack = reply.hijack
  reply.hijack = function admissionUpgradeBegins (this: FastifyReply) {
    reply.hijack = hijack
    const hijacked = hijack.call(this)
    permit.becameLongLived()
    return hijacked
  }
}

/**
 * The stream begins when its headers go out, whoever writes them: Fastify's `send`, the
 * application's `reply.raw.writeHead`, or the first `write` (which writes them implicitly through
 * `writeHead`). `marked`: any reply below 300; `stream`: an event stream.
 */
function watchHeaders (permit: Permit, kind: LongLivedKind): void {
  const raw = permit.reply.raw as unknown as { writeHead: (...args: unknown[]) => unknown, statusCode: number }
  const writeHead = raw.writeHead
  raw.writeHead = function admissionHeadersOut (this: unknown, ...args: unknown[]) {
    raw.writeHead = writeHead
    const written = writeHead.apply(this, args)
    if (kind === 'marked' ? raw.statusCode < 300 : eventStreamSent(permit.reply)) permit.becameLongLived()
    return written
  }
}
