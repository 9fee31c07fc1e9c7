import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify'
import { asError } from '../../callbacks/callback-error.js'
import { isThenable } from '../../callbacks/contained.js'
import type { RateDecision } from '../../rates/decision.js'
import type { HeldPermit, RouteGate } from '../route-gate.js'
import { eventStreamSent } from './event-stream.js'
import type { Done, PermitEnd, PermitRecord } from './permit-record.js'
import type { SlotHolder } from './slot-links.js'

export type { Done, PermitEnd, PermitRecord } from './permit-record.js'

/** What a route does when one of its permits ends: give its slots back, then tell its listeners. */
export type EndListener = (permit: Permit, how: PermitEnd) => void

/** What a permit knows of its route's plan. */
export interface PermitRoute {
  /** The route's gate: its counters and its in-flight slots. */
  readonly gate: RouteGate
  readonly ended: EndListener
  /** The route has a handler timeout: a permit waits for the handler's work, not for the timeout's 503. */
  readonly waitsForHandler: boolean
  /**
   * The route's handler is followed (it was declared where a registration saw it): its work can
   * be waited for. A route declared before any registration cannot be followed: its permit ends
   * with its connection.
   */
  readonly handlerWatched: boolean
  /** Reached by the registering context's hooks, not hooks of the route's own (see `RouteWiring`). */
  readonly byContext: boolean
  /** Login throttling: a failed response takes from the quota when it is sent. */
  readonly failures: { sending (permit: Permit): Promise<void> | undefined } | undefined
  /**
   * The registration's long-lived connections: a permit whose long-lived phase begins is counted
   * there until its connection closes; undefined on a route whose replies are never long-lived.
   */
  readonly longLived: { opened (permit: Permit): void } | undefined
}

// The response side: still open, written, gone with its connection, answered by the handler timeout.
const OPEN = 0
const RESPONDED = 1
const GONE = 2
const TIMED_OUT = 3
const HOW: readonly PermitEnd[] = ['refused', 'responded', 'aborted', 'timedOut']

// The handler's work still running: its promise, or (callback style) the `send` it will make.
const PROMISE = 1
const SEND = 2
// The handler handed its answer to Fastify (a value to send, or a `send` made before it returned).
const HANDED = 4
// The handler returned (its promise, if any, is PROMISE): what it does after is not followed.
const RETURNED = 8
// Flags that are the handler's work still running.
const WORKING = PROMISE | SEND

/**
 * One request's passage through the gate, one object per request holding three things, each
 * described by its own type: what the plan's steps decided (`PermitRecord`), the links of the
 * slots it holds (`SlotHolder`), and — the code of this class — when the request has ended, so
 * that its slots go back exactly once, by one rule:
 *
 *   a permit ends when its response side is over — the response was written (`onResponse`), or
 *   the connection or stream is gone, or the gate refused it — **and** the handler's own work has
 *   ended: its promise settled, or (a handler that answers by callback, or returns the reply) its
 *   `send` was made. A body already on its way when the connection goes (a stream) ends with it.
 *   A client that is gone ends the permit as soon as the handler has returned, unless its promise
 *   is pending: a `send` that never comes (a proxy's, for an aborted request) holds nothing.
 *
 *   A permit also ends when its request's long-lived phase begins (`becameLongLived`): the work
 *   of a websocket upgrade or an event stream is over once the connection is upgraded or the
 *   stream's headers are out, though the connection lives on (counted apart, never in flight).
 *
 * Each of those is observed however Fastify lets it be seen; `end` runs once, says how it ended,
 * and hands the permit to the route's listener (the slots, the adaptive sampler, login attempts).
 */
export class Permit implements PermitRecord, SlotHolder {
  readonly request: FastifyRequest
  readonly reply: FastifyReply
  /** The route's gate: its counters and its in-flight slots. */
  readonly route: RouteGate
  /** The gate whose quota decides (the route's, or its tier's). */
  gate: RouteGate
  /** Fastify's callback for the hook now running (`onRequest`, then `preHandler` when the check runs there). */
  done: Done
  /** The client's key, once the key step made it. */
  key: string | undefined = undefined
  /** The slots taken (flags of `Slots`). */
  held = 0
  /** How the permit ended; undefined while it is live. */
  how: PermitEnd | undefined = undefined
  /** The quota's answer, as the decision step left it for the headers and the verdict. */
  admitted = false
  retryAfterMs = 0
  /**
   * When its quota decided, on the quota's clock (routes that charge after the work only; undefined
   * when not known). Not a number until set: a double field would box one on every permit.
   */
  decidedAt: number | undefined = undefined
  /** A remote decision (its numbers for the headers). */
  decision: RateDecision | undefined = undefined
  /** The backend could not decide and the request was admitted anyway (`onBackendError: 'allow'`, or not enforcing). */
  backendFailed = false
  /** The request says it is a retry (its attempt header, on a route with `retries`). */
  retry = false
  /** Holds a slot of its client's (`clientInFlight`), given back when the permit ends. */
  clientHeld = false
  /** The connection's list of live permits (see `Slots`). */
  prev: SlotHolder | null = null
  next: SlotHolder | null = null
  connection: Record<symbol, unknown> | null = null
  /** The route's list of permits holding its slots, oldest first (see `Slots`). */
  older: HeldPermit | null = null
  newer: HeldPermit | null = null
  /** Held past the warning threshold, and logged (see `HeldPermits`). */
  warned = false
  /** Counted among the long-lived connections (see `LongLivedConnections`). */
  longLived = false
  private side = OPEN
  private running = 0
  /** The route's plan. */
  readonly plan: PermitRoute

  constructor (request: FastifyRequest, reply: FastifyReply, done: Done, plan: PermitRoute) {
    this.request = request
    this.reply = reply
    this.done = done
    this.plan = plan
    this.route = plan.gate
    this.gate = plan.gate
  }

  /** The gate answered the request (a refusal, or an error before the handler): nothing runs for it. */
  refused (): void {
    this.end('refused')
  }

  /**
   * The gate answered the request with `error` (Fastify's error path: a 500 naming the option, or
   * the error `callback` threw). A thrown value that is not an Error is answered as an
   * `AdmissionCallbackError`: Fastify would take a falsy one for "go on".
   */
  fail (error: unknown, callback?: string): void {
    this.end('refused')
    this.done(asError(callback, error))
  }

  /**
   * A step threw where no hook runner catches it — in a promise's continuation (a decision by
   * promise, an async `pressureHandler`), as a logger that throws would: the request is answered
   * 500 with the error unless it was answered already, so that it neither hangs nor leaves a
   * rejection unhandled.
   */
  lost (error: unknown): void {
    if (!this.reply.sent) this.fail(error)
  }

  /** `onResponse`: the response is over. */
  responded (): void {
    if (this.how !== undefined) return
    // HTTP/2's compatibility layer reports a reset stream as a finished response, which Fastify
    // takes for the end of the request (`onResponse`) though nothing was written: the client left.
    if (!this.reply.raw.writableEnded) {
      this.gone()
      return
    }
    if ((this.running & WORKING) === 0) {
      this.end('responded')
      return
    }
    // Fastify's handler timeout answered while the handler still runs; or an async handler sent early and works on.
    this.side = timedOut(this.request) ? TIMED_OUT : RESPONDED
  }

  /** The connection (HTTP/1) or stream (HTTP/2) closed while the permit was live. */
  gone (): void {
    if (this.how !== undefined || this.side === GONE) return
    const side = this.side
    this.side = GONE
    // Answered already (a timeout's 503, or an early send): only the handler's work is awaited.
    if (side !== OPEN) return
    if ((this.running & PROMISE) !== 0) return
    // The handler returned (what it left to a callback, or to a proxy that never sends for an
    // aborted request, is not followed); the answer was handed over (a body on its way is cut with
    // the connection: Fastify destroys a stream payload then); or the reply is hijacked (the
    // application's): the work is over.
    if ((this.running & (HANDED | RETURNED)) !== 0 || sending(this.reply) || !this.plan.handlerWatched) {
      this.end('aborted')
      return
    }
    // The handler has not started: its return (`watch`) or a `send` (Fastify's own error reply,
    // when it never runs) ends the permit.
    if ((this.running & SEND) === 0) this.awaitSend()
  }

  /**
   * The route's handler returned `result`: a promise is its work, followed to its end; a route
   * with a handler timeout whose handler answers by callback has work until its own `send`.
   */
  watch (result: unknown): void {
    if (this.how !== undefined) return
    this.running |= RETURNED
    if (result !== this.reply && isThenable(result)) {
      // The promise is the work: a `send` awaited since an abort before the handler started is not.
      if ((this.running & SEND) !== 0) {
        this.running &= ~SEND
        unpatchSend(this.reply)
      }
      this.running |= PROMISE
      const settled = (): void => { this.settled(PROMISE) }
      result.then(settled, settled)
      // An event stream whose headers went out before the handler's first `await`.
      if (this.reply.raw.headersSent) this.streamed()
      return
    }
    // A value is sent by Fastify right after; `undefined` or the reply itself: the handler sent
    // already (a stream send is piped at once, before any header is written), or will.
    if ((result !== undefined && result !== this.reply) || sending(this.reply)) {
      this.running |= HANDED
      // Headers out, or a stream piped (Fastify writes its headers with the first chunk).
      const raw = this.reply.raw
      if (raw.headersSent || raw.listenerCount('unpipe') !== 0) this.streamed()
      else if (this.side === GONE) this.end('aborted')
      return
    }
    // Gone before the handler returned, which sends nothing more it is followed for: over.
    if (this.side === GONE) {
      if ((this.running & SEND) !== 0) unpatchSend(this.reply)
      this.end('aborted')
      return
    }
    if (this.plan.waitsForHandler && (this.running & SEND) === 0) this.awaitSend()
  }

  /** Headers are out (or a stream is piped): an event stream's long-lived phase begins, unless the route's replies are never long-lived. */
  streamed (): void {
    if (this.plan.longLived !== undefined && eventStreamSent(this.reply)) this.becameLongLived()
  }

  /**
   * The request's long-lived phase begins (its connection upgraded, its event stream's headers
   * out): the permit ends — its in-flight slots go back, the adaptive limit takes no sample from it
   * — and the connection is counted as long-lived until it closes.
   */
  becameLongLived (): void {
    if (this.how !== undefined) return
    this.plan.longLived!.opened(this)
    this.end('longLived')
  }

  private settled (work: number): void {
    this.running &= ~work
    if ((this.running & WORKING) === 0 && this.side !== OPEN) this.end(HOW[this.side]!)
  }

  /**
   * Patches this one reply's `send` (so that no other request pays for it): the next `send` the
   * handler makes ends its work. The handler timeout's own 503 is not the handler's.
   */
  private awaitSend (): void {
    this.running |= SEND
    const permit = this
    const reply = this.reply
    const send = reply.send
    const patched = function admissionSendEndsWork (this: FastifyReply, payload?: unknown) {
      if (payload instanceof Error && timeoutError(permit.request, payload)) return send.call(this, payload)
      reply.send = send
      try {
        return send.call(this, payload)
      } finally {
        permit.settled(SEND)
      }
    } as FastifyReply['send'] & { [kBefore]?: FastifyReply['send'] }
    patched[kBefore] = send
    reply.send = patched
  }

  /** Ends the permit, once: its slots go back and the route's listeners hear how. */
  end (how: PermitEnd): void {
    if (this.how !== undefined) return
    this.how = how
    this.plan.ended(this, how)
  }
}

/** Whether Fastify's handler timeout fired for the request (its signal aborted by the timeout's error). */
function timedOut (request: FastifyRequest): boolean {
  const signal = (request as { signal?: AbortSignal }).signal
  return signal !== undefined && signal.aborted && (signal.reason as { code?: string } | undefined)?.code === 'FST_ERR_HANDLER_TIMEOUT'
}

/** The error Fastify's handler timeout sends: the signal's own reason. */
function timeoutError (request: FastifyRequest, payload: Error): boolean {
  const signal = (request as { signal?: AbortSignal }).signal
  return signal !== undefined && signal.aborted && signal.reason === payload
}

/** On a patched `send`: the `send` it replaced. */
const kBefore = Symbol('admission.send-before')

/** Puts back the `send` that `awaitSend` replaced. */
function unpatchSend (reply: FastifyReply): void {
  reply.send = (reply.send as FastifyReply['send'] & { [kBefore]: FastifyReply['send'] })[kBefore]
}

/** Whether the reply's answer is on its way: written, being written, or piped (a stream waiting its turn behind pipelined requests has no header yet); or the reply is hijacked. */
function sending (reply: FastifyReply): boolean {
  const raw = reply.raw
  return reply.sent || raw.headersSent || raw.listenerCount('unpipe') !== 0
}

type Handler = (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) => unknown

/** The handler a route was declared with, for each gated route whose handler is followed. */
const declared = new WeakMap<object, unknown>()

/**
 * Follows a gated route's handler: when it returns, each registration's permit on the request
 * (under its request field, `fields`) learns of the handler's work (its promise, or the answer it handed). The route's handler becomes
 * a proxy of the declared one, which Fastify and other plugins see as that function (its kind —
 * async or not —, name, length and properties), and which an opted-out route never gets.
 */
export function watchHandler (fields: readonly symbol[], route: RouteOptions): void {
  const handler = route.handler as Handler
  if (declared.has(handler)) return
  const watched = new Proxy(handler, {
    apply (target, self: FastifyInstance, args: [FastifyRequest, FastifyReply]) {
      const result = Reflect.apply(target, self, args) as unknown
      const request = args[0] as unknown as Record<symbol, Permit | null | undefined>
      for (let i = 0; i < fields.length; i++) request[fields[i]!]?.watch(result)
      return result
    }
  })
  declared.set(watched, handler)
  route.handler = watched as RouteOptions['handler']
}

/** The handler a route was declared with (GET's automatic HEAD twin is declared with it too). */
export function declaredHandler (route: RouteOptions): unknown {
  return declared.get(route.handler as object) ?? route.handler
}
