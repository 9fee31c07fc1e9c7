import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { acquire, release } from '../core/index.js'
import type { GateCounters } from './stats.js'
import type { RouteGate } from './route-gate.js'

// Per-request flags of one registration.
const HELD_GLOBAL = 1
const HELD_ROUTE = 2
const HELD = HELD_GLOBAL | HELD_ROUTE
/** The client went away before the response was written. */
const ABORTED = 4
/** The handler's promise is pending and the route has a handler timeout: wait for it. */
const RUNNING = 8
/** The response ended while the handler still ran. */
const ENDED = 16

export type Handler = (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) => unknown
type Fields = Record<symbol, unknown>
/** What the permits need of a connection: its `close`, and a field for the requests it carries. */
type Connection = Fields & { once (event: 'close', listener: (this: Connection) => void): unknown }

function isThenable (value: unknown): value is PromiseLike<unknown> {
  return value !== null && typeof value === 'object' && typeof (value as { then?: unknown }).then === 'function'
}

/**
 * The in-flight permits of one registration: taken in `onRequest` (the core's `acquire`), given
 * back exactly once (the core's `release`) when the request's work ends, whichever way it ends:
 *
 * - `responded()`, from the route's `onResponse` hook: the response is written;
 * - `aborted()`, when the connection closes while the request holds its permit: the client went
 *   away first. The permit then waits for the handler's work: its promise, or its `reply.send`
 *   (Fastify still makes that call after an abort, error replies included). The connection's
 *   `close` is the one signal that covers every request on it: a pipelined request whose socket
 *   closed has a queued response that never finishes or closes (so no `onResponse`), and its
 *   request reports `aborted` only when its body was not complete — a pipelined GET does, a
 *   pipelined POST whose body had arrived does not, so Fastify's `onRequestAbort` never runs for
 *   it (measured, Node 20). Each connection keeps the set of its requests holding a permit, and
 *   one shared `close` listener per connection (not per request) walks it;
 * - a route with a handler timeout: `onResponse` runs for the timeout's 503 while the handler goes
 *   on, so the permit waits for the handler's promise.
 *
 * Each registration has its own request fields, so two registrations are two gates.
 */
export class Permits {
  private readonly kFlags = Symbol('admission.flags')
  private readonly kWork = Symbol('admission.work')
  private readonly kReply = Symbol('admission.reply')
  private readonly kGate = Symbol('admission.gate')
  /** On a request: the set of its connection's held requests. On a connection: that set. */
  private readonly kHeld = Symbol('admission.held')
  private readonly global: GateCounters
  private readonly maxInFlight: number
  private readonly onConnectionClose: (this: Connection) => void

  constructor (fastify: FastifyInstance, global: GateCounters, maxInFlight: number) {
    this.global = global
    this.maxInFlight = maxInFlight
    fastify.decorateRequest(this.kFlags, 0)
    fastify.decorateRequest(this.kWork, null)
    fastify.decorateRequest(this.kReply, null)
    fastify.decorateRequest(this.kGate, null)
    fastify.decorateRequest(this.kHeld, null)
    const permits = this
    // One function for every connection (`this` is the socket): no closure per request.
    this.onConnectionClose = function admissionConnectionClosed (this: Connection) {
      const held = this[permits.kHeld] as Set<FastifyRequest>
      this[permits.kHeld] = undefined
      for (const request of held) permits.aborted(request)
    }
  }

  /** Takes the global permit, then the route's; false (holding nothing) when either is full. */
  take (request: FastifyRequest, reply: FastifyReply, gate: RouteGate): boolean {
    const global = this.global
    const counters = gate.counters
    let flags = HELD_ROUTE
    if (this.maxInFlight !== 0) {
      const taken = acquire(global.inFlight, this.maxInFlight)
      if (!taken.ok) return false
      global.inFlight = taken.n
      flags |= HELD_GLOBAL
    }
    if (gate.maxInFlight !== 0) {
      const taken = acquire(counters.inFlight, gate.maxInFlight)
      if (!taken.ok) {
        if ((flags & HELD_GLOBAL) !== 0) global.inFlight = release(global.inFlight)
        return false
      }
      counters.inFlight = taken.n
    } else {
      counters.inFlight++
    }
    const fields = request as unknown as Fields
    fields[this.kFlags] = flags
    fields[this.kReply] = reply
    fields[this.kGate] = gate
    const raw = request.raw as unknown as { socket?: Connection | null, stream?: Connection }
    const connection = raw.stream ?? raw.socket
    if (connection !== undefined && connection !== null) {
      // HTTP/2: a stream per request, so the stream's own close; HTTP/1: the socket's.
      let held = connection[this.kHeld] as Set<FastifyRequest> | undefined
      if (held === undefined) {
        held = new Set()
        connection[this.kHeld] = held
        connection.once('close', this.onConnectionClose)
      }
      held.add(request)
      fields[this.kHeld] = held
    }
    return true
  }

  /** Whether the global gate is full right now (for requests that hold no permit, such as 404s). */
  get full (): boolean {
    return this.maxInFlight !== 0 && this.global.inFlight >= this.maxInFlight
  }

  /** Gives back every permit the request holds, once. */
  free (request: FastifyRequest): void {
    const fields = request as unknown as Fields
    const flags = fields[this.kFlags] as number
    if ((flags & HELD) === 0) return
    fields[this.kFlags] = flags & ~HELD
    fields[this.kReply] = null
    const held = fields[this.kHeld] as Set<FastifyRequest> | null | undefined
    if (held != null) {
      held.delete(request)
      fields[this.kHeld] = null
    }
    if ((flags & HELD_GLOBAL) !== 0) this.global.inFlight = release(this.global.inFlight)
    const counters = (fields[this.kGate] as RouteGate).counters
    counters.inFlight = release(counters.inFlight)
  }

  /** `onResponse`: the response is written; the permit goes back unless the handler still runs. */
  responded (request: FastifyRequest, reply: FastifyReply): void {
    const fields = request as unknown as Fields
    const flags = fields[this.kFlags] as number
    if ((flags & HELD) === 0) return
    // HTTP/2's compatibility layer reports a reset stream as a finished response, which Fastify
    // takes for the end of the request (`onResponse`) though nothing was written: an abort.
    if (!reply.raw.writableEnded) {
      this.aborted(request)
      return
    }
    if ((flags & RUNNING) !== 0) fields[this.kFlags] = flags | ENDED
    else this.free(request)
  }

  /**
   * The connection closed while the request held its permit: its response was not written and
   * never will be (a response written but not yet `finish`ed, too). The permit waits for the
   * handler's work to end.
   */
  aborted (request: FastifyRequest): void {
    const fields = request as unknown as Fields
    const flags = fields[this.kFlags] as number
    if ((flags & HELD) === 0) return
    fields[this.kFlags] = flags | ABORTED
    // A handler with a timeout is followed by its promise already.
    if ((flags & RUNNING) !== 0) return
    const work = fields[this.kWork] as PromiseLike<unknown> | null
    if (work !== null) {
      const end = (): void => { this.free(request) }
      work.then(end, end)
      return
    }
    const reply = fields[this.kReply] as FastifyReply
    if (reply.sent) {
      this.free(request)
      return
    }
    // The work ends with a call to `send`: by a handler that has not started yet (or one that
    // answers later by callback), or by Fastify's own error reply (a body cut mid-way). Patching
    // this one aborted reply keeps an `onSend` hook off every other request's path.
    const send = reply.send
    const permits = this
    reply.send = function admissionSendAfterAbort (this: FastifyReply, payload?: unknown) {
      permits.free(request)
      return send.call(this, payload)
    }
  }

  /**
   * Wraps a route's handler so the permit learns when the handler's work ends, for the cases
   * where `onResponse` does not tell: after an abort, and after a handler timeout.
   */
  watch (handler: Handler, waitsForHandler: boolean): Handler {
    const permits = this
    return function admissionWatchedHandler (this: FastifyInstance, request, reply) {
      const result = handler.call(this, request, reply)
      const fields = request as unknown as Fields
      const flags = fields[permits.kFlags] as number
      if ((flags & HELD) === 0 || !isThenable(result)) return result
      if (waitsForHandler) {
        fields[permits.kFlags] = flags | RUNNING
        const settle = (): void => {
          const now = (fields[permits.kFlags] as number) & ~RUNNING
          fields[permits.kFlags] = now
          if ((now & (ENDED | ABORTED)) !== 0) permits.free(request)
        }
        result.then(settle, settle)
      } else if ((flags & ABORTED) !== 0) {
        // Aborted before the handler started: its promise ends its work (or its `send`, patched).
        const end = (): void => { permits.free(request) }
        result.then(end, end)
      } else {
        fields[permits.kWork] = result
      }
      return result
    }
  }
}
