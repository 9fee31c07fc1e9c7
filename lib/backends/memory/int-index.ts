/**
 * A hash index from 32-bit integer keys (IPv4 addresses, see `compactKey`) to slots, in two typed
 * arrays: 8 bytes an entry at a load between 3/8 and 3/4, against 29 to 58 bytes in a `Map` (whose
 * table doubles as well, with 24-byte entries). Open addressing with linear probing; a deletion
 * shifts the entries behind it back (no tombstones), so a lookup never walks over dead entries.
 */
const MIN_CAPACITY = 1024
const MAX_LOAD_NUMERATOR = 3
const MAX_LOAD_DENOMINATOR = 4
// Fibonacci hashing: the multiplier spreads consecutive addresses (one subnet) over the table.
const GOLDEN = 0x9e3779b1

export class IntIndex {
  size = 0
  private keys: Int32Array
  /** The slot of the entry plus one; 0 marks an empty position. */
  private slots: Int32Array
  private shift: number
  private mask: number

  constructor () {
    this.keys = new Int32Array(MIN_CAPACITY)
    this.slots = new Int32Array(MIN_CAPACITY)
    this.shift = 32 - Math.log2(MIN_CAPACITY)
    this.mask = MIN_CAPACITY - 1
  }

  private home (key: number): number {
    return Math.imul(key, GOLDEN) >>> this.shift
  }

  /** The slot of `key`, or -1. */
  get (key: number): number {
    const keys = this.keys
    const slots = this.slots
    let at = this.home(key)
    while (slots[at] !== 0 && keys[at] !== key) at = (at + 1) & this.mask
    // An empty position ends the run: 0 - 1 is "not there".
    return slots[at]! - 1
  }

  /** Adds `key` (not present: the caller looked it up first) at `slot`. */
  set (key: number, slot: number): void {
    if ((this.size + 1) * MAX_LOAD_DENOMINATOR > this.keys.length * MAX_LOAD_NUMERATOR) this.grow()
    this.place(key, slot + 1)
    this.size++
  }

  /** Removes `key`; its slot, or -1 when it was not there. */
  delete (key: number): number {
    const keys = this.keys
    const slots = this.slots
    const mask = this.mask
    let at = this.home(key)
    while (slots[at] !== 0 && keys[at] !== key) at = (at + 1) & mask
    const found = slots[at]!
    if (found === 0) return -1
    // Shift back each following entry of the run that may sit at `at`: one whose home is not
    // cyclically within (at, next].
    let hole = at
    for (let next = (at + 1) & mask; slots[next] !== 0; next = (next + 1) & mask) {
      const home = this.home(keys[next]!)
      if (((next - home) & mask) >= ((next - hole) & mask)) {
        keys[hole] = keys[next]!
        slots[hole] = slots[next]!
        hole = next
      }
    }
    slots[hole] = 0
    this.size--
    return found - 1
  }

  /** Every key whose slot `drop` accepts is removed; `drop` sees each entry once. */
  removeWhere (drop: (slot: number) => boolean): void {
    const doomed: number[] = []
    const slots = this.slots
    for (let at = 0; at < slots.length; at++) {
      if (slots[at] !== 0 && drop(slots[at]! - 1)) doomed.push(this.keys[at]!)
    }
    for (const key of doomed) this.delete(key)
  }

  private place (key: number, storedSlot: number): void {
    const slots = this.slots
    let at = this.home(key)
    while (slots[at] !== 0) at = (at + 1) & this.mask
    this.keys[at] = key
    slots[at] = storedSlot
  }

  private grow (): void {
    const keys = this.keys
    const slots = this.slots
    const capacity = keys.length * 2
    this.keys = new Int32Array(capacity)
    this.slots = new Int32Array(capacity)
    this.shift--
    this.mask = capacity - 1
    for (let at = 0; at < keys.length; at++) {
      if (slots[at] !== 0) this.place(keys[at]!, slots[at]!)
    }
  }
}
