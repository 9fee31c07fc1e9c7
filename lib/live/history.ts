/** One reading of the in-flight gate: when, its limit then (null without one), and the requests in flight. */
export interface LimitSample {
  readonly time: number
  readonly limit: number | null
  readonly inFlight: number
}

/** Samples a minute holds, one a second. */
export const HISTORY_LENGTH = 60

/**
 * The in-flight limit over the last minute: a ring of the latest samples, oldest first when read.
 * The server keeps it (not the page), so that a page opened now draws the minute before it too.
 */
export class LimitHistory {
  private readonly ring: LimitSample[]
  private next: number

  constructor () {
    this.ring = []
    this.next = 0
  }

  add (sample: LimitSample): void {
    if (this.ring.length < HISTORY_LENGTH) this.ring.push(sample)
    else this.ring[this.next] = sample
    this.next = (this.next + 1) % HISTORY_LENGTH
  }

  /** The samples held, oldest first. */
  samples (): LimitSample[] {
    return this.ring.length < HISTORY_LENGTH ? this.ring.slice() : [...this.ring.slice(this.next), ...this.ring.slice(0, this.next)]
  }
}
