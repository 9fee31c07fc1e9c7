// Per-variant medians over rounds of the per-round ratios, and the targets.
import type { RunResult } from './http.js'
import type { MemoryResult } from './memory.js'
import type { MicroResult } from './micro.js'
import type { RedisCostResult } from './redis/script-time.js'
import { median, quantile } from './stats.js'
import { variant } from './variants.js'

export interface Check { label: string, value: number, min?: number, max?: number, pass: boolean }

export interface VariantSummary {
  name: string
  description: string
  rps: number[]
  ratioToBare: number[]
  medianRps: number
  medianRatio: number
  /** First and third quartiles of the per-round ratios: how far one round can be trusted. */
  ratioQuartiles: [number, number]
  /** Median extra microseconds per request against bare Fastify (1e6/rps − 1e6/bare, per round). */
  extraMicros: number
  medianServerCpu: number
  /** Median share of the server's core that was not idle (≈ 1: the server side was the bottleneck). */
  medianServerCoreBusy: number
  medianLoadCpu: number
  maxNoise: number
  retried: number
  checks: Check[]
}

function checkOf (label: string, value: number, bound: { min?: number, max?: number }): Check {
  const pass = (bound.min === undefined || value >= bound.min) && (bound.max === undefined || value <= bound.max)
  return { label, value, ...bound, pass }
}

/** One round: each variant's two runs, and the two runs of bare Fastify around them. */
export interface Round {
  runs: Record<string, RunResult>
  bareBeside: Record<string, RunResult>
}

export function summarize (names: string[], rounds: Round[]): VariantSummary[] {
  const ratioOf = (round: Round, name: string): number => round.runs[name]!.rps / round.bareBeside[name]!.rps
  return names.map((name) => {
    const v = variant(name)
    const runs = rounds.map((round) => round.runs[name]!)
    const ratio = rounds.map((round) => ratioOf(round, name))
    const checks: Check[] = []
    if (v.minRatio !== undefined) checks.push(checkOf('× bare', median(ratio), { min: v.minRatio }))
    if (v.vs !== undefined && names.includes(v.vs.variant)) {
      const vs = v.vs.variant
      // Each side's ratio to the bare runs measured beside it, so both are in one unit.
      checks.push(checkOf(`× ${vs}`, median(rounds.map((round) => ratioOf(round, name) / ratioOf(round, vs))), { min: v.vs.minRatio }))
    }
    return {
      name,
      description: v.description,
      rps: runs.map((r) => r.rps),
      ratioToBare: ratio,
      medianRps: median(runs.map((r) => r.rps)),
      medianRatio: median(ratio),
      ratioQuartiles: [quantile(ratio, 0.25), quantile(ratio, 0.75)],
      extraMicros: median(rounds.map((round) => 1e6 / round.runs[name]!.rps - 1e6 / round.bareBeside[name]!.rps)),
      medianServerCpu: median(runs.map((r) => r.serverCpu)),
      medianServerCoreBusy: median(runs.map((r) => r.serverCoreBusy)),
      medianLoadCpu: median(runs.map((r) => r.cpu)),
      maxNoise: Math.max(...runs.map((r) => r.noise)),
      retried: runs.filter((r) => r.attempts > 1).length,
      checks
    }
  })
}

export function microChecks (micro: MicroResult | undefined, memory: MemoryResult[], redisCost?: RedisCostResult): Check[] {
  const checks: Check[] = []
  if (micro !== undefined) {
    checks.push(checkOf('core take, ops/s', micro.takeOpsPerSec, { min: 40e6 }))
    checks.push({ label: `memory limiter consume (token bucket), ops/s, ${micro.consumeKeys} random keys`, value: micro.consumeOpsPerSec, pass: true })
  }
  for (const m of memory) {
    if (m.store === 'admission') {
      checks.push(checkOf(`bytes per IPv4 identity, ${m.identities} keys, key strings included`, m.bytesPerIdentity, { max: 64 }))
    } else {
      checks.push({ label: 'bytes per IPv4 identity, @fastify/rate-limit LocalStore, key strings included', value: m.bytesPerIdentity, pass: true })
    }
  }
  if (redisCost !== undefined) {
    checks.push({ label: `Redis CPU per decision (µs, usec_per_call), this plugin's script, ${redisCost.keys} keys`, value: redisCost.admissionUsecPerCall, pass: true })
    checks.push({ label: "Redis CPU per decision (µs, usec_per_call), @fastify/rate-limit's script", value: redisCost.rateLimitUsecPerCall, pass: true })
  }
  return checks
}
