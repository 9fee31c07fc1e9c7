import { acquire, release } from '../../core/index.js'

/**
 * The in-flight slots of each client (`clientInFlight`), in this process: a count per client key,
 * taken with the core's `acquire` and given back with its `release` when the permit that took it
 * ends. A key's entry goes when its count reaches 0, so the map holds at most as many entries as
 * there are requests in flight holding one (each entry ~100 B with its key).
 */
export class ClientSlots {
  private readonly counts = new Map<string, number>()

  /** A slot for `key` while it holds fewer than `limit`: true when taken. */
  take (key: string, limit: number): boolean {
    const taken = acquire(this.counts.get(key) ?? 0, limit)
    if (!taken.ok) return false
    this.counts.set(key, taken.n)
    return true
  }

  /** A slot of `key` goes back (one it holds: its entry exists); its entry goes with its last one. */
  release (key: string): void {
    const n = release(this.counts.get(key)!)
    if (n === 0) this.counts.delete(key)
    else this.counts.set(key, n)
  }
}
