// The Redis bench's settings, from the environment (BENCH_* as in bench/config.ts).
import { num } from '../config.js'

/**
 * Where each process runs on the machine's two cores:
 * - `app-alone` (default): the HTTP server alone on core 1; Redis and the load generator on core 0.
 *   The server, the only side whose cost differs between the two plugins apart from Redis, then
 *   sets the pace, as an app host does in production (Redis and the clients are elsewhere).
 * - `redis-alone`: Redis alone on core 0; the server and the load generator share core 1 (the
 *   load's own cost per request, the same for both plugins, then dilutes the ratios toward 1).
 */
export type Layout = 'app-alone' | 'redis-alone'

export interface RedisBenchConfig {
  layout: Layout
  redisCore: number
  appCore: number
  loadCore: number
  decisionRounds: number
  /** Measured decisions per cell and round; 0 skips the decision part. */
  decisions: number
  concurrency: number
  keySpace: number
  httpRounds: number
  seconds: number
  warmupSeconds: number
  connections: number
  keys: number
  /** BENCH_HTTP=0 skips the HTTP part. */
  http: boolean
  out: string
}

export function readRedisConfig (): RedisBenchConfig {
  const layout = process.env.BENCH_LAYOUT === 'redis-alone' ? 'redis-alone' : 'app-alone'
  if (process.env.BENCH_LAYOUT !== undefined && process.env.BENCH_LAYOUT !== layout) throw new Error(`BENCH_LAYOUT must be app-alone or redis-alone, got ${process.env.BENCH_LAYOUT}`)
  return {
    layout,
    redisCore: 0,
    appCore: 1,
    loadCore: layout === 'app-alone' ? 0 : 1,
    decisionRounds: Math.floor(num('BENCH_DECISION_ROUNDS', 5)),
    decisions: Math.floor(num('BENCH_DECISIONS', 10_000)),
    concurrency: Math.max(1, Math.floor(num('BENCH_CONNECTIONS', 100))),
    keySpace: Math.max(1, Math.floor(num('BENCH_KEY_SPACE', 1_000_000))),
    httpRounds: Math.floor(num('BENCH_ROUNDS', 3)),
    seconds: Math.max(1, num('BENCH_SECONDS', 1.5)),
    warmupSeconds: num('BENCH_WARMUP', 0.5),
    connections: Math.max(1, Math.floor(num('BENCH_CONNECTIONS', 100))),
    keys: Math.floor(num('BENCH_KEYS', 10_000)),
    http: num('BENCH_HTTP', 1) !== 0,
    out: /^[\w.-]+$/.test(process.env.BENCH_OUT ?? '') ? process.env.BENCH_OUT! : 'latest'
  }
}
