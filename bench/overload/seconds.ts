// Per-second numbers of an open loop whose clients retry (the recovery benchmark): pure, over the
// generator's per-attempt arrays, so that a test can check them without sockets.
import { quantile } from './stats.js'

/** What became of one attempt: its HTTP status, or one of these. */
export const PENDING = 0
export const TIMEOUT = -1
export const ERROR = -2

/** The generator's attempts: index i is one HTTP request (a first attempt or a retry). */
export interface Attempts {
  /** How many entries are filled. */
  count: number
  /** Its due time (a first attempt's scheduled time, a retry's time to go), ms. */
  due: ArrayLike<number>
  /** When it ended (answer, deadline or error), ms. */
  ended: ArrayLike<number>
  /** Its HTTP status, or TIMEOUT / ERROR (a 200 after the deadline is a TIMEOUT). */
  status: ArrayLike<number>
  /** 1 for a first attempt, n for the (n - 1)th retry. */
  attempt: ArrayLike<number>
}

export interface Second {
  /** Attempts due in this second (first attempts and retries). */
  sent: number
  /** Retries' share of them. */
  retryShare: number
  /** 200s within the deadline among them, per second. */
  goodput: number
  /** First attempts' share of those 200s (the rest were retries the server admitted). */
  firstOk: number
  /** p99 latency of those 200s, from their due time, ms. */
  okP99: number
  /** Shares of the attempts answered 503, and timed out or broken. */
  shed: number
  timeouts: number
}

/** The attempts binned by due time into `seconds` seconds from `start` (ms); attempts outside are left out. */
export function perSecond (a: Attempts, start: number, seconds: number): Second[] {
  const ok: number[][] = Array.from({ length: seconds }, () => [])
  const sent = new Array<number>(seconds).fill(0)
  const retries = new Array<number>(seconds).fill(0)
  const firstOk = new Array<number>(seconds).fill(0)
  const shed = new Array<number>(seconds).fill(0)
  const timeouts = new Array<number>(seconds).fill(0)
  for (let i = 0; i < a.count; i++) {
    const s = Math.floor((a.due[i]! - start) / 1000)
    if (s < 0 || s >= seconds) continue
    sent[s]!++
    if (a.attempt[i]! > 1) retries[s]!++
    const code = a.status[i]!
    if (code === 200) {
      ok[s]!.push(a.ended[i]! - a.due[i]!)
      if (a.attempt[i] === 1) firstOk[s]!++
    }
    else if (code === 503) shed[s]!++
    else if (code === TIMEOUT || code === ERROR) timeouts[s]!++
  }
  const share = (x: number, n: number): number => (n === 0 ? Number.NaN : x / n)
  return sent.map((n, s) => ({ sent: n, retryShare: share(retries[s]!, n), goodput: ok[s]!.length, firstOk: share(firstOk[s]!, ok[s]!.length), okP99: quantile(ok[s]!, 0.99), shed: share(shed[s]!, n), timeouts: share(timeouts[s]!, n) }))
}

/**
 * Seconds from `from` (an index into `goodput`) until goodput reaches `threshold` and stays there to
 * the end: 0 when it never falls below from `from` on, NaN when the last second is still below.
 */
export function recoveredAfter (goodput: readonly number[], from: number, threshold: number): number {
  let last = -1
  for (let s = from; s < goodput.length; s++) if (!(goodput[s]! >= threshold)) last = s
  if (last === goodput.length - 1) return Number.NaN
  return last < 0 ? 0 : last + 1 - from
}
