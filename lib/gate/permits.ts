import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { acquire, release } from '../core/index.js'
import { CRITICAL, reserveOf, SHEDDABLE } from './priority.js'
import type { GateCounters } from './stats.js'
import type { RouteGate } from './route-gate.js'

// Per-request flags of one registration.
const HELD_GLOBAL = 1
const HELD_ROUTE = 2
/** A global slot taken by a `critical` route: counted in `critical` too (its reserve). */
const HELD_CRITICAL = 32
const HELD = HELD_GLOBAL | HELD_ROUTE | HELD_CRITICAL
/** A slot of the global gate, of either kind. */
export const HELD_SLOT = HELD_GLOBAL | HELD_CRITICAL
/** The client went away before the response was written. */
export const ABORTED = 4
/** The handler's promise is pending and the route has a handler timeout: wait for it. */
export const RUNNING = 8
/** The response ended while the handler still ran. */
const ENDED = 16

export type Handler = (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) => unknown
type Fields = Record<symbol, unknown>
/** What the permits need of a connection: its `close`, and a field for the permits it carries. */
type Connection = Fields & { once (event: 'close', listener: (this: Connection) => void): unknown }

/**
 * One request's hold on the gate, made when it takes its permits: one object per admitted
 * request, so that a request of an opted-out route carries a single empty field of this plugin.
 * The permits held on one connection form a doubly linked list through `prev`/`next` (no Set: no
 * hashing), whose head hangs on the connection.
 */
export class Permit {
  flags: number
  readonly gate: RouteGate
  readonly reply: FastifyReply
  /** The handler's promise, once it returned one. */
  work: PromiseLike<unknown> | null = null
  prev: Permit | null = null
  next: Permit | null = null
  connection: Connection | null = null

  constructor (flags: number, gate: RouteGate, reply: FastifyReply) {
    this.flags = flags
    this.gate = gate
    this.reply = reply
  }
}

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
  private readonly kPermit = Symbol('admission.permit')
  /** On a connection: the head of its list of held permits. */
  private readonly kHeld = Symbol('admission.held')
  protected readonly global: GateCounters
  /** The global in-flight limit L, or 0 for none; an adaptive gate moves it (`setLimit`). */
  protected limit = 0
  /** The share of L kept for `critical` routes, and what it comes to: R, and L - R for `sheddable`. */
  private readonly reserveShare: number
  private reserve = 0
  private sheddableLimit = 0
  /** Global slots held by `critical` routes. */
  private critical = 0
  private readonly onConnectionClose: (this: Connection) => void

  constructor (fastify: FastifyInstance, global: GateCounters, maxInFlight: number, reserveShare = 0) {
    this.global = global
    this.reserveShare = reserveShare
    this.setLimit(maxInFlight)
    fastify.decorateRequest(this.kPermit, null)
    const permits = this
    // One function for every connection (`this` is the socket): no closure per request.
    this.onConnectionClose = function admissionConnectionClosed (this: Connection) {
      let permit = this[permits.kHeld] as Permit | null
      while (permit !== null) {
        // aborted() may free the permit, which unlinks it: read the next one first.
        const next = permit.next
        permits.abort(permit)
        permit = next
      }
    }
  }

  /** The global limit L now (0: no global gate): fixed, or the adaptive limit's latest. */
  get currentLimit (): number {
    return this.limit
  }

  /** `Retry-After` of a 503 of the in-flight gates, s: 1 for a fixed limit; an adaptive one measures it. */
  retryAfter (): number {
    return 1
  }

  /** The plugin's `onClose`: nothing to stop for a fixed limit. */
  stop (): void {}

  protected setLimit (limit: number): void {
    this.limit = limit
    this.reserve = reserveOf(limit, this.reserveShare)
    this.sheddableLimit = limit - this.reserve
  }

  protected permitOf (request: FastifyRequest): Permit | null {
    return (request as unknown as Fields)[this.kPermit] as Permit | null
  }

  /** Takes the global permit, then the route's; false (holding nothing) when either is full. A `normal` route's. */
  take (request: FastifyRequest, reply: FastifyReply, gate: RouteGate): boolean {
    if (this.limit === 0) return this.hold(request, reply, gate, HELD_ROUTE)
    const taken = acquire(this.global.inFlight, this.limit)
    if (!taken.ok) return false
    this.global.inFlight = taken.n
    return this.hold(request, reply, gate, HELD_ROUTE | HELD_GLOBAL)
  }

  /**
   * `take` for a route with a priority other than `normal` (there is always a global gate then):
   * `sheddable` never takes the last R slots; `critical` takes one while the total is below L, or,
   * at the limit, while fewer than R critical requests hold one (the total then exceeds L by at most R).
   */
  takePrioritized (request: FastifyRequest, reply: FastifyReply, gate: RouteGate): boolean {
    const global = this.global
    if (gate.priority === SHEDDABLE) {
      const taken = acquire(global.inFlight, this.sheddableLimit)
      if (!taken.ok) return false
      global.inFlight = taken.n
      return this.hold(request, reply, gate, HELD_ROUTE | HELD_GLOBAL)
    }
    // Below its reserve, critical may go R beyond the limit (the others never exceed L, so that is
    // "always", unless an adaptive limit just fell); at its reserve, it stops at L like `normal`.
    const taken = acquire(global.inFlight, this.critical < this.reserve ? this.limit + this.reserve : this.limit)
    if (!taken.ok) return false
    global.inFlight = taken.n
    this.critical++
    return this.hold(request, reply, gate, HELD_ROUTE | HELD_CRITICAL)
  }

  /** The route's permit, after the global one (`flags` says which was taken); gives the global back when the route is full. */
  private hold (request: FastifyRequest, reply: FastifyReply, gate: RouteGate, flags: number): boolean {
    const counters = gate.counters
    if (gate.maxInFlight !== 0) {
      const taken = acquire(counters.inFlight, gate.maxInFlight)
      if (!taken.ok) {
        this.releaseGlobal(flags)
        return false
      }
      counters.inFlight = taken.n
    } else {
      counters.inFlight++
    }
    const permit = new Permit(flags, gate, reply)
    ;(request as unknown as Fields)[this.kPermit] = permit
    const raw = request.raw as unknown as { httpVersionMajor: number, socket?: Connection | null, stream?: Connection }
    // HTTP/2: a stream per request, so the stream's own close; HTTP/1: the socket's.
    const connection = raw.httpVersionMajor === 2 ? raw.stream : raw.socket
    if (connection !== undefined && connection !== null) {
      const head = connection[this.kHeld] as Permit | null | undefined
      if (head === undefined) connection.once('close', this.onConnectionClose)
      else if (head !== null) {
        head.prev = permit
        permit.next = head
      }
      connection[this.kHeld] = permit
      permit.connection = connection
    }
    return true
  }

  /** Whether the global gate is full right now (for requests that hold no permit, such as 404s). */
  get full (): boolean {
    return this.limit !== 0 && this.global.inFlight >= this.limit
  }

  // A normal global slot is the common case: one test, as before priorities.
  private releaseGlobal (flags: number): void {
    if ((flags & HELD_GLOBAL) !== 0) this.global.inFlight = release(this.global.inFlight)
    else if ((flags & HELD_CRITICAL) !== 0) {
      this.global.inFlight = release(this.global.inFlight)
      this.critical = release(this.critical)
    }
  }

  /** Gives back every permit the request holds, once. */
  free (request: FastifyRequest): void {
    const permit = this.permitOf(request)
    if (permit !== null) this.give(permit)
  }

  private give (permit: Permit): void {
    const flags = permit.flags
    if ((flags & HELD) === 0) return
    permit.flags = flags & ~HELD
    const connection = permit.connection
    if (connection !== null) {
      const { prev, next } = permit
      if (prev === null) connection[this.kHeld] = next
      else prev.next = next
      if (next !== null) next.prev = prev
      permit.prev = null
      permit.next = null
      permit.connection = null
    }
    this.releaseGlobal(flags)
    const counters = permit.gate.counters
    counters.inFlight = release(counters.inFlight)
  }

  /** `onResponse`: the response is written; the permit goes back unless the handler still runs. */
  responded (request: FastifyRequest, reply: FastifyReply): void {
    const permit = this.permitOf(request)
    if (permit === null || (permit.flags & HELD) === 0) return
    // HTTP/2's compatibility layer reports a reset stream as a finished response, which Fastify
    // takes for the end of the request (`onResponse`) though nothing was written: an abort.
    if (!reply.raw.writableEnded) {
      this.abort(permit)
      return
    }
    if ((permit.flags & RUNNING) !== 0) permit.flags |= ENDED
    else this.give(permit)
  }

  /**
   * The connection closed while the request held its permit: its response was not written and
   * never will be (a response written but not yet `finish`ed, too). The permit waits for the
   * handler's work to end.
   */
  private abort (permit: Permit): void {
    const flags = permit.flags
    if ((flags & HELD) === 0) return
    permit.flags = flags | ABORTED
    // A handler with a timeout is followed by its promise already.
    if ((flags & RUNNING) !== 0) return
    const work = permit.work
    if (work !== null) {
      const end = (): void => { this.give(permit) }
      work.then(end, end)
      return
    }
    const reply = permit.reply
    if (reply.sent) {
      this.give(permit)
      return
    }
    // The work ends with a call to `send`: by a handler that has not started yet (or one that
    // answers later by callback), or by Fastify's own error reply (a body cut mid-way). Patching
    // this one aborted reply keeps an `onSend` hook off every other request's path.
    const send = reply.send
    const permits = this
    reply.send = function admissionSendAfterAbort (this: FastifyReply, payload?: unknown) {
      permits.give(permit)
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
      const permit = permits.permitOf(request)
      if (permit === null || (permit.flags & HELD) === 0 || !isThenable(result)) return result
      if (waitsForHandler) {
        permit.flags |= RUNNING
        const settle = (): void => {
          const now = permit.flags & ~RUNNING
          permit.flags = now
          if ((now & (ENDED | ABORTED)) !== 0) permits.give(permit)
        }
        result.then(settle, settle)
      } else if ((permit.flags & ABORTED) !== 0) {
        // Aborted before the handler started: its promise ends its work (or its `send`, patched).
        const end = (): void => { permits.give(permit) }
        result.then(end, end)
      } else {
        permit.work = result
      }
      return result
    }
  }
}
