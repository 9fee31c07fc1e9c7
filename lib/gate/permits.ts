import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { acquire, release } from '../core/index.js'
import type { GateCounters } from './stats.js'
import type { RouteGate } from './route-gate.js'

// Per-request flags of one registration.
const HELD_GLOBAL = 1
const HELD_ROUTE = 2
const HELD = HELD_GLOBAL | HELD_ROUTE
const ABORTED = 4
/** The handler's promise is pending and the route has a handler timeout: wait for it. */
const RUNNING = 8
/** The response ended while the handler still ran. */
const ENDED = 16

export type Handler = (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) => unknown
type Fields = Record<symbol, unknown>

function isThenable (value: unknown): value is PromiseLike<unknown> {
  return value !== null && typeof value === 'object' && typeof (value as { then?: unknown }).then === 'function'
}

/**
 * The in-flight slots of one registration: taken in `onRequest`, given back exactly once when
 * the request's work ends, whichever way it ends. Each registration has its own request fields,
 * so two registrations are two gates.
 */
export class Slots {
  private readonly kFlags = Symbol('admission.flags')
  private readonly kGate = Symbol('admission.gate')
  private readonly kWork = Symbol('admission.work')
  /** On the raw response: the reply it belongs to. */
  private readonly kReply = Symbol('admission.reply')
  private readonly global: GateCounters
  private readonly maxInFlight: number
  /** Requests of routes never seen: their handler is not watched. */
  private readonly unwatched: RouteGate
  private readonly onClose: (this: Fields & FastifyReply['raw']) => void

  constructor (fastify: FastifyInstance, global: GateCounters, maxInFlight: number, unwatched: RouteGate) {
    this.global = global
    this.maxInFlight = maxInFlight
    this.unwatched = unwatched
    const slots = this
    // One function for every response (`this` is the response): no closure per request.
    this.onClose = function admissionResponseClosed (this: Fields & FastifyReply['raw']) {
      const reply = this[slots.kReply] as FastifyReply
      if (this.writableEnded) slots.responded(reply.request)
      else slots.aborted(reply.request, reply)
    }
    fastify.decorateRequest(this.kFlags, 0)
    fastify.decorateRequest(this.kGate, null)
    fastify.decorateRequest(this.kWork, null)
  }

  /** Takes the global slot, then the route's; false (holding nothing) when either is full. */
  take (request: FastifyRequest, gate: RouteGate): boolean {
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
    fields[this.kGate] = gate
    return true
  }

  /**
   * Follows a request that holds its slot past `onRequest` to its end. One `close` listener on the
   * response tells both ends: after the response is written (`writableEnded`) and after the client
   * went away first. Fastify's `onResponse` and `onRequestAbort` hooks would tell the same with two
   * listeners and two hook runs on every request, refused ones included; this runs only for the
   * requests that hold a slot.
   */
  follow (reply: FastifyReply): void {
    const raw = reply.raw as unknown as Fields & FastifyReply['raw']
    raw[this.kReply] = reply
    raw.on('close', this.onClose)
  }

  /** Gives back every slot the request holds, once. */
  free (request: FastifyRequest): void {
    const fields = request as unknown as Fields
    const flags = fields[this.kFlags] as number
    if ((flags & HELD) === 0) return
    fields[this.kFlags] = flags & ~HELD
    if ((flags & HELD_GLOBAL) !== 0) this.global.inFlight = release(this.global.inFlight)
    const counters = (fields[this.kGate] as RouteGate).counters
    counters.inFlight = release(counters.inFlight)
  }

  /** The response is written; the slot goes back unless the handler still runs. */
  private responded (request: FastifyRequest): void {
    const fields = request as unknown as Fields
    const flags = fields[this.kFlags] as number
    if ((flags & HELD) === 0) return
    if ((flags & RUNNING) !== 0) fields[this.kFlags] = flags | ENDED
    else this.free(request)
  }

  /**
   * Wraps a route's handler so the gate learns when its work ends, for the two cases where
   * `onResponse` does not tell: after a client abort (Fastify then never runs `onResponse`) and
   * after a handler timeout (`onResponse` runs while the handler goes on).
   */
  watch (handler: Handler, waitsForHandler: boolean): Handler {
    const slots = this
    return function admissionWatchedHandler (this: FastifyInstance, request, reply) {
      const result = handler.call(this, request, reply)
      const fields = request as unknown as Fields
      const flags = fields[slots.kFlags] as number
      if ((flags & HELD) === 0 || !isThenable(result)) return result
      if (waitsForHandler) {
        fields[slots.kFlags] = flags | RUNNING
        const settle = (): void => {
          const now = (fields[slots.kFlags] as number) & ~RUNNING
          fields[slots.kFlags] = now
          if ((now & (ENDED | ABORTED)) !== 0) slots.free(request)
        }
        result.then(settle, settle)
      } else if ((flags & ABORTED) !== 0) {
        const end = (): void => { slots.free(request) }
        result.then(end, end)
      } else {
        fields[slots.kWork] = result
      }
      return result
    }
  }

  /** The response closed before it was written (client abort, connection timeout): the slot waits for the handler's work to end. */
  private aborted (request: FastifyRequest, reply: FastifyReply): void {
    const fields = request as unknown as Fields
    const flags = fields[this.kFlags] as number
    if ((flags & HELD) === 0) return
    fields[this.kFlags] = flags | ABORTED
    if ((flags & RUNNING) !== 0) return
    const work = fields[this.kWork] as PromiseLike<unknown> | null
    if (work !== null) {
      const end = (): void => { this.free(request) }
      work.then(end, end)
      return
    }
    if (reply.sent || fields[this.kGate] === this.unwatched) {
      this.free(request)
      return
    }
    // The handler has not finished: it either has not started (and will, or an error reply is
    // sent first) or it answers later by callback. Either way the end is a call to `send`, which
    // Fastify still makes after an abort though it never runs `onResponse`. Patching this one
    // reply keeps an `onSend` hook off every other request's path.
    const send = reply.send
    const slots = this
    reply.send = function admissionSendAfterAbort (this: FastifyReply, payload?: unknown) {
      slots.free(request)
      return send.call(this, payload)
    }
  }
}
