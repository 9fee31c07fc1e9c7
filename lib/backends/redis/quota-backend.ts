import type { LeaseSettings } from './lease-book.js'

/**
 * What a quota of the Redis backend (a limiter, `redis-limiter.ts`, or a stack, `redis-stack.ts`)
 * needs of its backend: the key prefix, the settings, the clocks and the script calls.
 * `RedisBackend` (`redis-backend.ts`) is the one implementation; the quotas know it by this
 * interface only, so that neither module imports the other's.
 */
export interface QuotaBackend {
  /** Start of every key (see `RedisBackend` for the layout). */
  readonly prefix: string
  /** A decision Redis has not answered within this many ms rejects with `RATES_UNAVAILABLE`. */
  readonly timeoutMs: number
  /** Entries per limiter's deny cache; 0 when it is off. */
  readonly denyCacheEntries: number
  /** Lease settings of its limiters; undefined when leases are off. */
  readonly leases: LeaseSettings | undefined
  readonly isStopped: boolean
  /** The local clock, in ms: monotonic, fractional (only differences are used). */
  now (): number
  /** The decision script's arguments after the key (see `RedisBackend.args()`). */
  args (fingerprint: string, amount: string, sent: number, latest?: number): string[]
  /** `lead` (a script's own arguments), then the test time and the deadline as `args()` sends them. */
  timed (lead: string[], sent: number, latest?: number): string[]
  /** Keeps the server's now from a reply that came at local time `received`. */
  observe (serverNow: number, received: number): void
  /** The server's time now, estimated from the latest reply (never ahead of it); undefined before any. */
  serverNow (): number | undefined
  /** Runs the decision script on `key`. */
  run (key: string, args: string[]): Promise<unknown>
  /** Runs a decision script (`sha` the SHA-1 of `source`) on `keys`, with the NOSCRIPT fallback, within `timeoutMs`. */
  runScript (sha: string, source: string, keys: string | readonly string[], args: string[]): Promise<unknown>
  /** Runs a rarely used script with `EVAL`, within `timeoutMs`. */
  runOnce (script: string, keys: string | readonly string[], args: string[]): Promise<unknown>
}
