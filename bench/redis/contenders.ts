// The two Redis rate limiters the bench compares, each called as its plugin calls it per request:
// this plugin's backend through its public API (`redisBackend(…).limiter(…).consume(…)`, on the
// built package), and @fastify/rate-limit 11's RedisStore (`incr`, one script call).
import { createRequire } from 'node:module'
import { Redis } from 'ioredis'
import { redisBackend } from '../../dist/index.js'

export type Library = 'admission' | 'rate-limit'
/** `hot`: admitting, every decision on one key (a route-wide limit, a tenant, a crawler). */
export type Mode = 'admit' | 'refuse' | 'hot'

export interface Cell {
  library: Library
  mode: Mode
  /** This plugin's algorithm: the gate's default, or @fastify/rate-limit's own (a fixed window). */
  algorithm: 'token-bucket' | 'fixed-window'
  /** ioredis `enableAutoPipelining`. */
  autoPipelining: boolean
  /** This plugin's deny cache (refusing only; @fastify/rate-limit has none). */
  denyCache: boolean
  /** This plugin's leases (`redisBackend({ leases: true })`; the hot key only). */
  leases?: boolean
}

export const cellName = (c: Cell): string =>
  `${c.library} ${c.mode}${c.algorithm === 'fixed-window' ? ' fixed-window' : ''}${c.library === 'admission' && c.mode === 'refuse' ? (c.denyCache ? ' deny-cache' : ' no-cache') : ''}${c.leases === true ? ' leases' : ''}${c.autoPipelining ? ' +AP' : ''}`

/** Every cell of the decision bench, in a fixed order (a round runs them in this order or reversed). */
export function allCells (): Cell[] {
  const cells: Cell[] = []
  for (const autoPipelining of [false, true]) {
    const tb = 'token-bucket' as const
    cells.push({ library: 'admission', mode: 'admit', algorithm: tb, autoPipelining, denyCache: true })
    cells.push({ library: 'admission', mode: 'admit', algorithm: 'fixed-window', autoPipelining, denyCache: true })
    cells.push({ library: 'rate-limit', mode: 'admit', algorithm: tb, autoPipelining, denyCache: false })
    cells.push({ library: 'admission', mode: 'refuse', algorithm: tb, autoPipelining, denyCache: true })
    cells.push({ library: 'admission', mode: 'refuse', algorithm: tb, autoPipelining, denyCache: false })
    cells.push({ library: 'rate-limit', mode: 'refuse', algorithm: tb, autoPipelining, denyCache: false })
    cells.push({ library: 'admission', mode: 'hot', algorithm: tb, autoPipelining, denyCache: true, leases: true })
    cells.push({ library: 'admission', mode: 'hot', algorithm: tb, autoPipelining, denyCache: true })
    cells.push({ library: 'rate-limit', mode: 'hot', algorithm: tb, autoPipelining, denyCache: false })
  }
  return cells
}

// The HTTP bench's policies (bench/server.ts): admitting (random keys or one hot key), a token
// bucket of 1e9 a minute that never denies; refusing, 1 an hour, spent before the measured decisions.
const MINUTE = 60_000
const HOUR = 3_600_000
const ADMIT = { limit: 1e9, windowMs: MINUTE }
const REFUSE = { limit: 1, windowMs: HOUR }

export interface Contender {
  /** One decision for `key`: true when allowed. */
  decide (key: string): Promise<boolean>
  /** Ends the contender's own part before its client quits (this plugin gives back its leases). */
  stop (): Promise<void>
  client: Redis
}

/** @fastify/rate-limit's Redis store, as its plugin calls it (the package types only the plugin). */
interface RedisStoreLike {
  incr (key: string, cb: (error: Error | null, result?: { current: number, ttl: number }) => void, timeWindow: number, max: number): void
}
type RedisStoreClass = new (continueExceeding: boolean, exponentialBackoff: boolean, redis: Redis, key: string) => RedisStoreLike
const RedisStore = createRequire(import.meta.url)('@fastify/rate-limit/store/RedisStore.js') as RedisStoreClass

/** A contender on a new client of its own, with the cell's client options, on keys under `prefix`. */
export function contender (cell: Cell, url: string, prefix: string): Contender {
  const client = new Redis(url, { enableAutoPipelining: cell.autoPipelining })
  const policy = cell.mode === 'refuse' ? REFUSE : ADMIT
  if (cell.library === 'admission') {
    // A long timeout: cost, not the fail policy, is measured (on a busy machine a call can stall).
    const backend = redisBackend({ client, prefix, timeoutMs: 10_000, ...(cell.denyCache ? {} : { denyCache: false as const }), ...(cell.leases === true ? { leases: true } : {}) })
    const limiter = backend.limiter('bench#admission:*', cell.algorithm === 'token-bucket' ? { algorithm: 'token-bucket', ...policy, burst: policy.limit } : { algorithm: 'fixed-window', ...policy })
    return { client, decide: async (key) => (await limiter.consume(key, 1)).allowed, stop: async () => backend.stop() }
  }
  const store = new RedisStore(false, false, client, prefix)
  // The plugin's rule: allowed while the count is at most max.
  return {
    client,
    stop: async () => {},
    decide: (key) => new Promise((resolve, reject) => {
      store.incr(key, (error, result) => { error === null ? resolve(result!.current <= policy.limit) : reject(error) }, policy.windowMs, policy.limit)
    })
  }
}
