// The benchmark's settings, from the environment.
import { DEFAULT_VARIANTS, variant } from './variants.js'

/** A non-negative number from the environment variable `name`, or `fallback` when unset. */
export function num (name: string, fallback: number): number {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a non-negative number, got ${raw}`)
  return value
}

export interface BenchConfig {
  /** Interleaved rounds of every variant. */
  rounds: number
  /** Seconds of load per variant per round. */
  seconds: number
  /** Seconds of load per variant before the first round (discarded). */
  warmupSeconds: number
  connections: number
  pipelining: number
  /** Distinct client identities in the load, split evenly among the connections. */
  keys: number
  variants: string[]
  /** A run during which other processes took more than this share of a core is run again. */
  maxNoise: number
  /** A run whose server core was idle more than 1 − this share (the load set the pace) is run again. */
  minServerBusy: number
  /** Extra attempts of a noisy run (the least noisy attempt is kept). */
  retries: number
  /** Milliseconds to wait at most for idle cores before each run. */
  quietWaitMs: number
  /** Run the micro-benchmarks (take ops/s, bytes per identity). */
  micro: boolean
  /** Results go to bench/results-<out>.json. */
  out: string
}

export function readConfig (): BenchConfig {
  const variants = (process.env.BENCH_VARIANTS ?? DEFAULT_VARIANTS.join(',')).split(',').map((v) => v.trim()).filter((v) => v !== '')
  for (const name of variants) variant(name)
  if (!variants.includes('bare')) variants.unshift('bare')
  return {
    rounds: Math.max(1, Math.floor(num('BENCH_ROUNDS', 7))),
    seconds: Math.max(1, num('BENCH_SECONDS', 2)),
    warmupSeconds: num('BENCH_WARMUP', 2),
    connections: Math.max(1, Math.floor(num('BENCH_CONNECTIONS', 100))),
    pipelining: Math.max(1, Math.floor(num('BENCH_PIPELINING', 1))),
    keys: Math.floor(num('BENCH_KEYS', 10_000)),
    variants,
    maxNoise: num('BENCH_NOISE', 0.05),
    minServerBusy: num('BENCH_MIN_BUSY', 0.95),
    retries: Math.floor(num('BENCH_RETRIES', 2)),
    quietWaitMs: num('BENCH_QUIET_WAIT', 30) * 1000,
    micro: num('BENCH_MICRO', 1) !== 0,
    out: /^[\w.-]+$/.test(process.env.BENCH_OUT ?? '') ? process.env.BENCH_OUT! : 'latest'
  }
}
