import type { FastifyInstance } from 'fastify'
import { acquire, release } from '../../core/index.js'
import { retryLimit } from '../../core/attempt.js'
import type { GateCounters } from '../../metrics/counters.js'
import { reserveOf } from './priority.js'
import type { SlotHolder } from './slot-links.js'

/** Slots a permit holds: the global gate's (normal, or critical within its reserve) and its route's. */
export const HELD_GLOBAL = 1
export const HELD_ROUTE = 2
export const HELD_CRITICAL = 4
/** A connection's list of permits once its `close` has been walked: no permit is linked to it again. */
const CLOSED = false

/** A slot of the global gate, of either kind. */
export const HELD_SLOT = HELD_GLOBAL | HELD_CRITICAL

/** A way to take the slots of a route, chosen once per route by its priority. */
export type Take = (permit: SlotHolder) => boolean

type Connection = Record<symbol, unknown> & { once (event: 'close', listener: (this: Connection) => void): unknown, readonly destroyed: boolean }

/**
 * The in-flight slots of one registration: the global limit L (fixed, or moved by the adaptive
 * sampler), its reserve R for `critical` routes, and each route's own semaphore — taken with the
 * core's `acquire`, given back with its `release` when the permit ends. A permit that holds a slot
 * is tracked on its connection (one shared `close` listener per connection, walking its list of
 * live permits: a pipelined request whose socket closed has a queued response that never finishes
 * or closes, so only the connection tells).
 */
export class Slots {
  readonly global: GateCounters
  /** The global limit L, 0 for none. */
  limit = 0
  /** The limit this registration sets (fixed, or the adaptive limit's), before a fleet's share caps it. */
  ownLimit = 0
  /** A fleet's share (`maxInFlight: { fleet }`): this process's part of the fleet's limit; Infinity without one. */
  private cap = Number.POSITIVE_INFINITY
  /** `Retry-After` of a full gate, s: 1 for a fixed limit; the adaptive sampler keeps it at one measured round trip. */
  retryAfter = 1
  private readonly reserveShare: number
  /** The share of L kept for first attempts (`retries.reserve`), 0 without retries. */
  private readonly retryShare: number
  /** A retry takes a global slot only while fewer than this many are held (`retryLimit`). */
  retryLimit = 0
  private reserve = 0
  private sheddableLimit = 0
  /** Global slots held by `critical` routes. */
  private critical = 0
  private readonly kHeld = Symbol('admission.held')
  private readonly onConnectionClose: (this: Connection) => void

  constructor (global: GateCounters, maxInFlight: number, reserveShare = 0, retryShare = 0) {
    this.global = global
    this.reserveShare = reserveShare
    this.retryShare = retryShare
    this.setLimit(maxInFlight)
    const kHeld = this.kHeld
    // One function for every connection (`this` is the socket or stream): no closure per request.
    this.onConnectionClose = function admissionConnectionClosed (this: Connection) {
      let permit = this[kHeld] as SlotHolder | null
      this[kHeld] = CLOSED
      while (permit !== null) {
        const next = permit.next
        permit.prev = null
        permit.next = null
        permit.connection = null
        permit.gone()
        permit = next
      }
    }
  }

  setLimit (limit: number): void {
    this.ownLimit = limit
    this.apply()
  }

  /** This process's share of a fleet's limit: L is the smaller of it and the limit set (at least 1). */
  setShare (share: number): void {
    this.cap = share
    this.apply()
  }

  private apply (): void {
    const limit = Math.min(this.ownLimit, this.cap)
    this.limit = limit
    this.reserve = reserveOf(limit, this.reserveShare)
    this.sheddableLimit = limit - this.reserve
    this.retryLimit = retryLimit(limit, this.retryShare)
  }

  /** A fleet's share bounds the global gate (it is no more than the limit set): a full gate is the fleet's. */
  get fleetBound (): boolean {
    return this.cap <= this.ownLimit
  }

  /** Whether the global gate is full right now (for requests that hold no slot, such as 404s). */
  get full (): boolean {
    return this.limit !== 0 && this.global.inFlight >= this.limit
  }

  /** Whether a retry finds the global gate full: its last `retries.reserve` of slots are first attempts'. */
  get fullForRetries (): boolean {
    return this.limit !== 0 && this.global.inFlight >= this.retryLimit
  }

  /** The route's slot alone (no global gate). */
  readonly routeOnly: Take = (permit) => this.hold(permit, HELD_ROUTE)

  /** A `normal` route: a global slot while fewer than L are held, then the route's. */
  readonly normal: Take = (permit) => {
    const taken = acquire(this.global.inFlight, this.limit)
    if (!taken.ok) return false
    this.global.inFlight = taken.n
    return this.hold(permit, HELD_ROUTE | HELD_GLOBAL)
  }

  /** A `sheddable` route never takes the last R slots: it is the first refused as the gate fills. */
  readonly sheddable: Take = (permit) => {
    const taken = acquire(this.global.inFlight, this.sheddableLimit)
    if (!taken.ok) return false
    this.global.inFlight = taken.n
    return this.hold(permit, HELD_ROUTE | HELD_GLOBAL)
  }

  /**
   * A `critical` route takes a slot while the total is below L, or, at the limit, while fewer than
   * R critical requests hold one (the total then exceeds L by at most R; the reserve is enforced
   * only at the limit, so spare capacity is borrowed by every priority below it).
   */
  readonly criticalTake: Take = (permit) => {
    const taken = acquire(this.global.inFlight, this.critical < this.reserve ? this.limit + this.reserve : this.limit)
    if (!taken.ok) return false
    this.global.inFlight = taken.n
    this.critical++
    return this.hold(permit, HELD_ROUTE | HELD_CRITICAL)
  }

  /** The route's slot after the global one (`flags`); the global goes back when the route is full. */
  private hold (permit: SlotHolder, flags: number): boolean {
    const route = permit.route
    const counters = route.counters
    if (route.maxInFlight !== 0) {
      const taken = acquire(counters.inFlight, route.maxInFlight)
      if (!taken.ok) {
        this.releaseGlobal(flags)
        return false
      }
      counters.inFlight = taken.n
    } else {
      counters.inFlight++
    }
    permit.held = flags
    this.track(permit)
    // The route's permits, oldest first (each later one is newer): the age of its oldest in `stats()`.
    const newest = route.newest
    if (newest === null) route.oldest = permit
    else {
      newest.newer = permit
      permit.older = newest
    }
    route.newest = permit
    return true
  }

  /** Links the permit to its connection (HTTP/2: its stream; HTTP/1: its socket). */
  private track (permit: SlotHolder): void {
    const raw = permit.request.raw as unknown as { httpVersionMajor: number, socket: Connection, stream: Connection }
    const connection = raw.httpVersionMajor === 2 ? raw.stream : raw.socket
    // The connection's list: undefined before its first permit, null while empty, CLOSED once walked.
    const head = connection[this.kHeld] as SlotHolder | null | undefined | typeof CLOSED
    if (head === CLOSED) {
      // Closed before this request reached the gate (a pipelined request read before its client
      // left, gated after): the permit is gone, told once the hook that holds it has run.
      queueMicrotask(() => { permit.gone() })
      return
    }
    if (head === undefined) {
      // The first permit of the connection: its `close` may be past already (the same case).
      if (connection.destroyed) queueMicrotask(() => { permit.gone() })
      connection.once('close', this.onConnectionClose)
    } else if (head !== null) {
      head.prev = permit
      permit.next = head
    }
    connection[this.kHeld] = permit
    permit.connection = connection
  }

  /** The permit's slots go back (the core's `release`), and it leaves its connection's list. */
  readonly release = (permit: SlotHolder): void => {
    const flags = permit.held
    if (flags === 0) return
    permit.held = 0
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
    const route = permit.route
    const { older, newer } = permit
    if (older === null) route.oldest = newer
    else older.newer = newer
    if (newer === null) route.newest = older
    else newer.older = older
    permit.older = null
    permit.newer = null
    this.releaseGlobal(flags)
    const counters = route.counters
    counters.inFlight = release(counters.inFlight)
  }

  private releaseGlobal (flags: number): void {
    if ((flags & HELD_GLOBAL) !== 0) this.global.inFlight = release(this.global.inFlight)
    else if ((flags & HELD_CRITICAL) !== 0) {
      this.global.inFlight = release(this.global.inFlight)
      this.critical = release(this.critical)
    }
  }
}

/** The request's permit field of one registration (two registrations are two gates). */
export function permitField (fastify: FastifyInstance): symbol {
  const field = Symbol('admission.permit')
  fastify.decorateRequest(field, null)
  return field
}
