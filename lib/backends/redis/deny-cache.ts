import type { Kernel, Policy } from '../../core/rates/index.js'
import { deniedDecision, type RateDenied } from '../../rates/decision.js'

interface DenyEntry {
  /** The state after the denial, as the script returned it. */
  readonly state: unknown
  /** The server's time of that decision (ms). */
  readonly serverNow: number
  /** Local clock when the request was sent, and when its reply came. */
  readonly sent: number
  readonly received: number
  /** Local time after which the state may have fully recovered: nothing left to deny. */
  readonly expires: number
}

/**
 * A bounded local memory of denials: per identity, the last state Redis returned with a denial,
 * and when. Rule: a request is denied locally iff the algorithm's kernel, run on that state at the
 * LATEST time the server's clock can read by now, denies its cost. Otherwise it goes to Redis.
 *
 * Why that never denies what Redis would allow: the state in Redis is that state plus whatever was
 * consumed since (consuming never makes a cost pass sooner; only Redis's own expiry, which comes
 * after full recovery, or someone deleting keys by hand, removes state), and every algorithm only
 * recovers as time passes. The server read its clock (`serverNow`, floored to the ms) after the
 * request was sent, so now it reads at most serverNow + ceil(localNow - sent) (clock rates agree;
 * drift over a recovery time is far below a ms). Any cost, not only the denied one, is answered
 * this way: a smaller cost that might pass goes to Redis.
 *
 * The answer's fields are what Redis would say, made conservative for the uncertainty of the
 * server's time (one round trip): `remaining` at the EARLIEST time the server can read by now,
 * serverNow + floor(localNow - received); `retryAfterMs` counted so that waiting it locally
 * reaches the passing time on the server's clock for sure (never early); `resetAt` the kernel's
 * (a denial does not move it). With one clock (the test hook) they are exactly Redis's answer.
 *
 * A local denial consumes nothing and writes nothing, so Redis keeps the state the kernel last
 * stored; should the server's clock later step back, a decision made there may then differ from
 * one made without the cache (the kernels' rule for such clocks is itself an approximation), but
 * no time is ever credited twice.
 *
 * Bounded: at `maxEntries`, the entry remembered longest ago goes (a lost entry costs one round
 * trip, never a wrong decision); an entry is dropped when found expired or when Redis admits.
 */
export class DenyCache {
  readonly maxEntries: number
  private readonly entries = new Map<string, DenyEntry>()
  private readonly kernel: Kernel<unknown>
  private readonly policy: Policy

  constructor (maxEntries: number, kernel: Kernel<unknown>, policy: Policy) {
    this.maxEntries = maxEntries
    this.kernel = kernel
    this.policy = policy
  }

  get size (): number {
    return this.entries.size
  }

  /** A local denial of `cost` at local time `now`, or undefined: ask Redis. */
  answer (identity: string, cost: number, now: number): RateDenied | undefined {
    const entry = this.entries.get(identity)
    if (entry === undefined) return undefined
    if (now >= entry.expires) {
      this.entries.delete(identity)
      return undefined
    }
    const latest = entry.serverNow + Math.ceil(now - entry.sent)
    const outcome = this.kernel.consume(entry.state, this.policy, latest, cost)
    if (outcome.allowed) return undefined
    const earliest = entry.serverNow + Math.floor(now - entry.received)
    const remaining = this.kernel.consume(entry.state, this.policy, earliest, cost).remaining
    // Passes at latest + retry on the server's clock at the earliest; that clock reads at least
    // `earliest` now.
    return deniedDecision(remaining, latest + outcome.retryAfterMs - earliest, outcome.resetAt, outcome.moreAt)
  }

  remember (identity: string, state: unknown, serverNow: number, sent: number, received: number): void {
    const entries = this.entries
    entries.delete(identity)
    if (entries.size >= this.maxEntries) entries.delete(entries.keys().next().value as string)
    const expires = sent + this.kernel.recoversAt(state, this.policy) - serverNow
    entries.set(identity, { state, serverNow, sent, received, expires })
  }

  forget (identity: string): void {
    this.entries.delete(identity)
  }

  clear (): void {
    this.entries.clear()
  }
}

