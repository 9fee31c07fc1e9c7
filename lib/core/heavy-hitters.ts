/**
 * The most frequent keys of a stream over a sliding window, in bounded memory whatever the number of
 * distinct keys: Space-Saving (Metwally, Agrawal and El Abbadi, "Efficient Computation of Frequent
 * and Top-k Elements in Data Streams", ICDT 2005) in each slice of time, the slices merged when read.
 *
 * One slice holds at most `counters` (m) keys, each with a count and an error. A key it holds is
 * counted; a new key takes a free counter, or, when all m are taken, the counter of least count c:
 * the key there is forgotten and the new one gets c + 1, with error c. So, for a slice of N keys:
 * - every key seen more than N / m times is held (the least count never exceeds N / m);
 * - a key's count is at least its true count, and at most its error (≤ the least count) more.
 *
 * The window is `slices` slices of `sliceMs` each, kept in a ring: a slice is emptied when time
 * reaches it again, so what is read covers the current slice and the `slices - 1` before it. Reading
 * merges the live slices: a key's count adds its counts where it is held and, where a full slice does
 * not hold it, that slice's least count (what it may have had there) — an upper bound again; its
 * error adds up the same way, so `count - error` (what it was seen at least) never exceeds the truth.
 *
 * Deterministic: no clock (time is passed in as `now`, ms), no I/O, no randomness. Unlike the rest
 * of the core it is a structure updated in place: a value per update would copy m counters. A clock
 * that steps back counts into the latest slice seen (a time before 0, into the first). Keys are held as given: memory is at most
 * `slices * counters` keys and their counters.
 */

/** The sketch's size and window, validated by the caller: positive integers. */
export interface HeavyHittersOptions {
  /** Keys held per slice (m): a key seen more than 1/m of a slice's stream is always held. */
  readonly counters: number
  /** How long a slice lasts, ms. */
  readonly sliceMs: number
  /** Slices in the window: it covers the current one and the `slices - 1` before it. */
  readonly slices: number
}

/** A key as read from the window: `count` is at least its true count, `count - error` at most. */
export interface HeavyHitter {
  readonly key: string
  readonly count: number
  readonly error: number
}

/** One slice's Space-Saving summary: m counters in a min-heap by count, found by key through `index`. */
class Slice {
  /** The slice's number (`floor(now / sliceMs)`), -1 while unused. */
  epoch = -1
  size = 0
  readonly index = new Map<string, number>()
  readonly keys: Array<string | undefined>
  readonly counts: Float64Array
  readonly errors: Float64Array
  /** Counters in heap order (the least count first), and each counter's place in it. */
  readonly heap: Int32Array
  readonly place: Int32Array

  constructor (counters: number) {
    this.keys = new Array<string | undefined>(counters).fill(undefined)
    this.counts = new Float64Array(counters)
    this.errors = new Float64Array(counters)
    this.heap = new Int32Array(counters)
    this.place = new Int32Array(counters)
  }

  /** Emptied for slice `epoch`: no key is kept alive by a slice gone by. */
  reset (epoch: number): void {
    this.epoch = epoch
    this.size = 0
    this.index.clear()
    this.keys.fill(undefined)
  }

  add (key: string): void {
    const at = this.index.get(key)
    if (at !== undefined) {
      this.counts[at]!++
      this.down(this.place[at]!)
      return
    }
    const size = this.size
    if (size < this.counts.length) {
      this.size = size + 1
      this.keys[size] = key
      this.counts[size] = 1
      this.errors[size] = 0
      this.heap[size] = size
      this.place[size] = size
      this.index.set(key, size)
      this.up(size)
      return
    }
    // Full: the key of least count gives its counter up; the new key inherits that count as its error.
    const least = this.heap[0]!
    this.index.delete(this.keys[least]!)
    this.keys[least] = key
    this.index.set(key, least)
    this.errors[least] = this.counts[least]!
    this.counts[least]!++
    this.down(0)
  }

  /** The least count when every counter is taken (what a key it does not hold may have had), else 0. */
  get floor (): number {
    return this.size === this.counts.length ? this.counts[this.heap[0]!]! : 0
  }

  private up (i: number): void {
    const { heap, counts } = this
    const counter = heap[i]!
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (counts[heap[parent]!]! <= counts[counter]!) break
      this.put(i, heap[parent]!)
      i = parent
    }
    this.put(i, counter)
  }

  private down (i: number): void {
    const { heap, counts, size } = this
    const counter = heap[i]!
    for (;;) {
      let child = 2 * i + 1
      if (child >= size) break
      if (child + 1 < size && counts[heap[child + 1]!]! < counts[heap[child]!]!) child++
      if (counts[heap[child]!]! >= counts[counter]!) break
      this.put(i, heap[child]!)
      i = child
    }
    this.put(i, counter)
  }

  private put (i: number, counter: number): void {
    this.heap[i] = counter
    this.place[counter] = i
  }
}

export class HeavyHitters {
  private readonly sliceMs: number
  private readonly ring: Slice[]
  /** The latest slice number seen: time never goes back here (nor before 0). */
  private latest = 0

  constructor (options: HeavyHittersOptions) {
    this.sliceMs = options.sliceMs
    this.ring = Array.from({ length: options.slices }, () => new Slice(options.counters))
  }

  /** One occurrence of `key` at `now`. */
  add (key: string, now: number): void {
    this.sliceAt(now).add(key)
  }

  /** Keys held, over every slice (the memory it takes is this many keys and their counters). */
  get held (): number {
    let held = 0
    for (const slice of this.ring) held += slice.size
    return held
  }

  /**
   * The `k` keys seen most in the window at `now`, most first by what they were seen at least
   * (`count - error`), then by `count`, then by key (a stable order for equal counts).
   */
  top (k: number, now: number): HeavyHitter[] {
    const latest = this.epochOf(now)
    const live = this.ring.filter((slice) => slice.epoch > latest - this.ring.length)
    let floors = 0
    for (const slice of live) floors += slice.floor
    // Per key: its counts and errors where held, and the floors of the slices that hold it.
    const merged = new Map<string, { count: number, error: number, floors: number }>()
    for (const slice of live) {
      const floor = slice.floor
      for (let i = 0; i < slice.size; i++) {
        const key = slice.keys[i]!
        let entry = merged.get(key)
        if (entry === undefined) merged.set(key, entry = { count: 0, error: 0, floors: 0 })
        entry.count += slice.counts[i]!
        entry.error += slice.errors[i]!
        entry.floors += floor
      }
    }
    const all: HeavyHitter[] = []
    for (const [key, entry] of merged) {
      const elsewhere = floors - entry.floors
      all.push({ key, count: entry.count + elsewhere, error: entry.error + elsewhere })
    }
    all.sort((a, b) => (b.count - b.error) - (a.count - a.error) || b.count - a.count || (a.key < b.key ? -1 : 1))
    return all.slice(0, k)
  }

  private epochOf (now: number): number {
    const epoch = Math.floor(now / this.sliceMs)
    if (epoch > this.latest) this.latest = epoch
    return this.latest
  }

  private sliceAt (now: number): Slice {
    const epoch = this.epochOf(now)
    const slice = this.ring[epoch % this.ring.length]!
    if (slice.epoch !== epoch) slice.reset(epoch)
    return slice
  }
}
