import type { HeldPermit, RouteGate } from '../route-gate.js'

/**
 * A permit as `Slots` sees it while it holds in-flight slots: the slots it took, and the two lists
 * it is linked into — its connection's live permits (walked when the connection closes: a pipelined
 * request's queued response never finishes, only its connection tells) and its route's held list.
 * The links live on the permit itself, so holding a slot allocates nothing.
 */
export interface SlotHolder extends HeldPermit {
  readonly route: RouteGate
  /** The slots taken (flags of `Slots`). */
  held: number
  /** The connection's list of live permits. */
  prev: SlotHolder | null
  next: SlotHolder | null
  connection: Record<symbol, unknown> | null
  /** Its connection (or stream) closed: the response side is gone. */
  gone (): void
}
