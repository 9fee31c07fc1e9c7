import { performance } from 'node:perf_hooks'
import { HeavyHitters } from '../core/heavy-hitters.js'
import { keyDigest, type KeyDigest } from './headers/partition-key.js'
import type { OffendersSettings } from './options/offenders-option.js'
import type { Offender } from './stats.js'

/**
 * Keys held per slice for each key listed: a client refused more than 1/(5 × top) of a slice's
 * refusals is always held, whatever the number of clients.
 */
const COUNTERS_PER_LISTED = 5
/** The last minute, in six slices of 10 s: a refusal leaves the list 50 to 60 s after it. */
const SLICE_MS = 10_000
const SLICES = 6

/** The sketch behind a registration's offenders: at most 6 × 5 × `top` keys held. */
export function offendersSketch (top: number): HeavyHitters {
  return new HeavyHitters({ counters: COUNTERS_PER_LISTED * top, sliceMs: SLICE_MS, slices: SLICES })
}

/**
 * A registration's top offenders: the clients refused most for what they did (their quota, their
 * in-flight limit) over the last minute. A refusal adds its key to the sketch (one clock read, a
 * lookup, a few moves in a heap of 5 × `top`); nothing else pays. Keys are kept as the quota saw
 * them and shown, when read, as their digests unless `rawKeys` (a digest per key listed, per read).
 */
export class Offenders {
  private readonly sketch: HeavyHitters
  private readonly top: number
  private readonly shown: (key: string) => string

  /** `digest`: the `pk` digest (`headers.partitionKey`), so that a key listed is the `pk` its client was sent; else one under a secret of its own. */
  constructor (settings: OffendersSettings, digest: KeyDigest | undefined) {
    this.top = settings.top
    this.sketch = offendersSketch(settings.top)
    this.shown = settings.rawKeys ? (key) => key : digest ?? keyDigest()
  }

  /** A client refused for what it did. */
  readonly refused = (key: string): void => {
    this.sketch.add(key, performance.now())
  }

  /** The clients refused most over the last minute, most first; each with the refusals it was counted at least. */
  list (): Offender[] {
    return this.sketch.top(this.top, performance.now()).map(({ key, count, error }) => ({ key: this.shown(key), refused: count - error }))
  }
}
