import { compactKey } from './compact-key.js'
import { IntIndex } from './int-index.js'

/**
 * The registry of limiter states: an index from the client's key to a slot in one
 * `Float64Array` holding `fields` numbers per slot. An IPv4 address is held as its 32 bits in an
 * `IntIndex` (no string kept: 27 to 45 B per identity in all), any other key in a `Map`. Two
 * clients never share a slot.
 *
 * A state is dropped only once it has fully recovered (then it equals a new one, so dropping it
 * changes no decision). When the table holds `maxIdentities` live states, a new key gets no slot and
 * `waitMs` says, honestly, when one can be had.
 */
export interface Recovery {
  /** Tick at which the state in `slot` has fully recovered, if nothing else touches it. */
  recoversAt (data: Float64Array, slot: number): number
  /** An upper bound of the time any state needs to recover from the worst state, in ticks. */
  readonly worstRecovery: number
}

const INITIAL_SLOTS = 1024

export class StateTable {
  readonly fields: number
  readonly maxIdentities: number
  data: Float64Array
  /** After a failed `insert`: ticks until a slot can be had. */
  waitMs = 0
  /** Keys that are not IPv4 addresses → slot. */
  private readonly index = new Map<string, number>()
  /** IPv4 addresses, as `compactKey` gives them → slot. */
  private readonly addresses = new IntIndex()
  private readonly recovery: Recovery
  private readonly freeSlots: number[] = []
  private highWater = 0
  // The earliest recovery among live states, and whose: learned by each sweep and kept up by
  // `placed`; `stale` once that state was used again (its recovery moved later).
  private earliest = Number.POSITIVE_INFINITY
  private earliestSlot = -1
  private stale = false
  private nextSweepAllowed = Number.NEGATIVE_INFINITY

  constructor (fields: number, maxIdentities: number, recovery: Recovery) {
    this.fields = fields
    this.maxIdentities = maxIdentities
    this.recovery = recovery
    this.data = new Float64Array(Math.min(INITIAL_SLOTS, maxIdentities) * fields)
  }

  /** States held: live ones, and recovered ones not yet dropped (by a sweep, or `remove`). */
  get size (): number {
    return this.index.size + this.addresses.size
  }

  /** The slot of `key`, or -1. */
  find (key: string): number {
    const compact = compactKey(key)
    if (typeof compact === 'number') return this.addresses.get(compact)
    const slot = this.index.get(compact)
    return slot === undefined ? -1 : slot
  }

  /**
   * Marks the state in `slot` as changed. A state's recovery time only moves later when it is
   * used, so only a change to the earliest one can make the remembered earliest time wrong.
   */
  touched (slot: number): void {
    if (slot === this.earliestSlot) this.stale = true
  }

  /** The caller filled a new slot: its state recovers at `recoversAt`. */
  placed (slot: number, recoversAt: number): void {
    // Earlier than the remembered earliest, which is never later than the true one: this is
    // the true earliest now, even when the remembered one was stale.
    if (recoversAt < this.earliest) {
      this.earliest = recoversAt
      this.earliestSlot = slot
      this.stale = false
    }
  }

  /**
   * Forgets `key`'s state; true when it had one. Its slot is free again. The remembered earliest
   * recovery may have been this state's: it becomes stale (never too late, see `insert`).
   */
  remove (key: string): boolean {
    const compact = compactKey(key)
    let slot: number | undefined
    if (typeof compact === 'number') {
      slot = this.addresses.delete(compact)
      if (slot === -1) return false
    } else {
      slot = this.index.get(compact)
      if (slot === undefined) return false
      this.index.delete(compact)
    }
    this.freeSlots.push(slot)
    if (slot === this.earliestSlot) this.stale = true
    return true
  }

  /** A new slot for `key` (the caller fills it, then calls `placed`), or -1 when every slot holds live state. */
  insert (key: string, now: number): number {
    let slot = this.freeSlots.pop()
    if (slot === undefined && this.highWater < this.maxIdentities) slot = this.grow()
    if (slot === undefined) {
      if ((now >= this.earliest || this.stale) && now >= this.nextSweepAllowed) this.sweep(now)
      slot = this.freeSlots.pop()
      if (slot === undefined) {
        // A stale earliest time might be too soon; the worst case never is. Either way no slot
        // is freed before the next sweep may run.
        const recovery = this.stale ? this.recovery.worstRecovery : this.earliest - now
        this.waitMs = Math.max(1, recovery, this.nextSweepAllowed - now)
        return -1
      }
    }
    const compact = compactKey(key)
    if (typeof compact === 'number') this.addresses.set(compact, slot)
    else this.index.set(compact, slot)
    return slot
  }

  private grow (): number {
    const slot = this.highWater++
    if (slot * this.fields >= this.data.length) {
      // Half again, not double: the spare room of a grown table is at most a third of it.
      const slots = Math.min(this.maxIdentities, Math.ceil((this.data.length / this.fields) * 1.5))
      const data = new Float64Array(slots * this.fields)
      data.set(this.data)
      this.data = data
    }
    return slot
  }

  /**
   * Drops every state that has recovered by `now` and remembers the earliest recovery among the
   * rest. It reads the whole table, so it runs at most once per size/1000 ticks; a full table under
   * a flood of new keys then costs a bounded share of the time.
   */
  private sweep (now: number): void {
    let earliest = Number.POSITIVE_INFINITY
    let earliestSlot = -1
    const recovered = (slot: number): boolean => {
      const at = this.recovery.recoversAt(this.data, slot)
      if (at <= now) {
        this.freeSlots.push(slot)
        return true
      }
      if (at < earliest) {
        earliest = at
        earliestSlot = slot
      }
      return false
    }
    for (const [key, slot] of this.index) {
      if (recovered(slot)) this.index.delete(key)
    }
    this.addresses.removeWhere(recovered)
    this.earliest = earliest
    this.earliestSlot = earliestSlot
    this.stale = false
    this.nextSweepAllowed = now + Math.ceil(this.size / 1000)
  }
}
