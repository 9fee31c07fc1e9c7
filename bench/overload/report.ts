// Markdown tables for the overload benchmark.
import type { Bin, StreamResult } from './load.js'
import { latencySpread, type Spread, spread } from './stats.js'
import type { ModelName } from './work.js'

export interface CellRecord {
  repeat: number
  model: ModelName
  variant: string
  /** Offered load as a multiple of C. */
  load: number
  rate: number
  capacity: number
  achievedRate: number
  /** goodput / C */
  goodput: number
  okP50: number
  okP99: number
  shedShare: number
  shedP99: number
  timeoutShare: number
  /** Timeouts that never got a connection, as a share of all requests. */
  timeoutQueuedShare: number
  errorShare: number
  lagP99: number
  queuedShare: number
  /** p99 of the wait for a free connection in the client (ms). */
  queueWaitP99: number
  connections: number
  /** The generator's connection cap, and C × deadline (the outstanding requests an open loop at C holds when answers take the deadline). */
  sockets?: number
  cDeadline?: number
  deadlineMs?: number
  maxOpen?: number
  connectErrors?: number
  lagP50?: number
  lagMax?: number
  /** A fresh connection per request (`Connection: close`). */
  reconnect?: boolean
  wastedShare: number
  maxQueued: number
  serverCpu: number
  noise: number
}

export interface StepRecord { variant: string, capacity: number, rate: number, phases: { beforeS: number, slowS: number, afterS: number, factor: number }, bins: Bin[], noise: number }

const fmt = (x: number, digits: number): string => (Number.isNaN(x) ? '–' : x.toFixed(digits))
const ms = (x: number): string => (Number.isNaN(x) ? '–' : x >= 100 ? x.toFixed(0) : x.toFixed(1))
const pct = (x: number): string => (Number.isNaN(x) ? '–' : `${(x * 100).toFixed(x > 0 && x < 0.1 ? 1 : 0)} %`)

function cellText (s: Spread, f: (x: number) => string, repeats: number): string {
  if (repeats <= 1 || Number.isNaN(s.median) || s.min === s.max) return f(s.median)
  return `${f(s.median)} (${f(s.min)}–${f(s.max)})`
}

/** The generator did not keep the schedule: under 95 % of the rate, or p99 lag over 10 % of the deadline (100 ms in records without one). */
export const behind = (r: CellRecord): boolean => r.achievedRate < 0.95 * r.rate || r.lagP99 > 0.1 * (r.deadlineMs ?? 1000)

export function matrixTable (records: readonly CellRecord[], model: ModelName, variants: readonly string[], loads: readonly number[], repeats: number): string {
  const lines = [
    '| variant | offered | sent/s | goodput / C | p50 200 (ms) | p99 200 (ms) | 503 | p99 503 (ms) | timeouts | ↳ never sent | client queued | p99 client wait (ms) | gen lag p50 / p99 / max (ms) | sockets (C × deadline) | most open | wasted work | other CPU (cores) |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |'
  ]
  for (const variant of variants) {
    for (const load of loads) {
      const rs = records.filter((r) => r.model === model && r.variant === variant && r.load === load)
      if (rs.length === 0) continue
      const col = (pick: (r: CellRecord) => number, f: (x: number) => string, of: (v: number[]) => Spread = spread): string => cellText(of(rs.map(pick)), f, repeats)
      lines.push(`| ${variant} | ${load} C (${Math.round(rs[0]!.rate)}/s) | ${col((r) => r.achievedRate, (x) => x.toFixed(0))}${rs.some(behind) ? ' ⚠ generator behind' : ''} | ${col((r) => r.goodput, (x) => fmt(x, 2))} | ${col((r) => r.okP50, ms, latencySpread)} | ${col((r) => r.okP99, ms, latencySpread)} | ${col((r) => r.shedShare, pct)} | ${col((r) => r.shedP99, ms, latencySpread)} | ${col((r) => r.timeoutShare, pct)} | ${col((r) => r.timeoutQueuedShare, pct)} | ${col((r) => r.queuedShare, pct)} | ${col((r) => r.queueWaitP99, ms)} | ${col((r) => r.lagP50 ?? Number.NaN, ms)} / ${col((r) => r.lagP99, ms)} / ${col((r) => r.lagMax ?? Number.NaN, ms)} | ${rs[0]!.sockets ?? '–'} (${rs[0]!.cDeadline === undefined ? '–' : Math.round(rs[0]!.cDeadline)}) | ${col((r) => r.maxOpen ?? Number.NaN, (x) => x.toFixed(0))} | ${col((r) => r.wastedShare, pct)} | ${col((r) => r.noise, (x) => fmt(x, 2))} |`)
    }
  }
  return lines.join('\n')
}

export function stepTable (steps: readonly StepRecord[]): string {
  if (steps.length === 0) return ''
  const first = steps[0]!
  const { beforeS, slowS } = first.phases
  const head = `| s | phase | ${steps.map((s) => `${s.variant} goodput / C | ${s.variant} p99 (ms)`).join(' | ')} |`
  const rule = `| --- | --- | ${steps.map(() => '--- | ---').join(' | ')} |`
  const rows: string[] = []
  const n = Math.max(...steps.map((s) => s.bins.length))
  for (let t = 0; t < n; t++) {
    const phase = t < beforeS ? 'normal' : t < beforeS + slowS ? `${first.phases.factor}× slower` : 'recovered'
    rows.push(`| ${t} | ${phase} | ${steps.map((s) => { const b = s.bins[t]; return b === undefined ? '– | –' : `${fmt(b.goodput / s.capacity, 2)} | ${ms(b.okP99)}` }).join(' | ')} |`)
  }
  return [head, rule, ...rows].join('\n')
}

export interface PriorityRecord {
  variant: string
  repeat: number
  capacity: number
  sheddable: StreamResult
  critical: StreamResult
  noise: number
  /** The generator: rate asked for and sent (req/s), lag p99 and max (ms), connection cap, C × deadline, deadline. */
  targetRate?: number
  achievedRate?: number
  lagP99?: number
  lagMax?: number
  sockets?: number
  cDeadline?: number
  deadlineMs?: number
}

/** The priorities scenario: per variant, what each stream got (median of the repeats, min–max). */
export function priorityTable (records: PriorityRecord[], variants: string[]): string {
  const num = (x: number | null): number => (x === null ? Number.NaN : x)
  const cell = (xs: number[], f: (x: number) => string): string => {
    const s = spread(xs)
    return Number.isNaN(s.median) || s.min === s.max ? f(s.median) : `${f(s.median)} (${f(s.min)}–${f(s.max)})`
  }
  const lines = [
    '| variant | critical offered/s | critical goodput / offered | critical p99 200 (ms) | critical 503 | sheddable goodput / C | sheddable p99 200 (ms) | sheddable 503 | sent/s | gen lag p99 / max (ms) | sockets (C × deadline) | other CPU |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |'
  ]
  for (const variant of variants) {
    const rs = records.filter((r) => r.variant === variant)
    if (rs.length === 0) continue
    lines.push(`| ${variant} | ${cell(rs.map((r) => r.critical.offered), (x) => x.toFixed(0))} | ${cell(rs.map((r) => r.critical.goodput / Math.max(1, r.critical.offered)), pct)} | ${cell(rs.map((r) => num(r.critical.okP99)), ms)} | ${cell(rs.map((r) => r.critical.shed), pct)} | ${cell(rs.map((r) => r.sheddable.goodput / r.capacity), (x) => fmt(x, 2))} | ${cell(rs.map((r) => num(r.sheddable.okP99)), ms)} | ${cell(rs.map((r) => r.sheddable.shed), pct)} | ${cell(rs.map((r) => r.achievedRate ?? Number.NaN), (x) => x.toFixed(0))}${rs.some((r) => r.achievedRate !== undefined && r.targetRate !== undefined && (r.achievedRate < 0.95 * r.targetRate || (r.lagP99 ?? 0) > 0.1 * (r.deadlineMs ?? 1000))) ? ' ⚠ generator behind' : ''} | ${cell(rs.map((r) => r.lagP99 ?? Number.NaN), ms)} / ${cell(rs.map((r) => r.lagMax ?? Number.NaN), ms)} | ${rs[0]!.sockets ?? '–'} (${rs[0]!.cDeadline === undefined ? '–' : Math.round(rs[0]!.cDeadline)}) | ${cell(rs.map((r) => r.noise), (x) => fmt(x, 2))} |`)
  }
  return lines.join('\n')
}

export interface SpikeRecord {
  variant: string
  model: ModelName
  repeat: number
  capacity: number
  phases: { base: number, spike: number, beforeMs: number, spikeMs: number, afterMs: number, binMs: number }
  sockets: number
  cDeadline: number
  deadlineMs: number
  /** p99 of the 200s scheduled in the steady phase before the spike (the baseline). */
  baseP99: number
  /** The largest per-bin p99 from the spike's start on. */
  maxBinP99: number
  /** ms from the spike's start to the end of the last bin whose p99 is over 3 × baseP99 (or that had timeouts and no 200); 0: never over. */
  recoveryMs: number
  /** goodput / C over the spike's phase, and the shares of 503s and timeouts in it. */
  spikeGoodput: number
  spikeShed: number
  spikeTimeouts: number
  lagP99: number
  lagMax: number
  /** Per bin (binMs): p99 of the 200s scheduled in it (NaN: none) and counts. */
  bins: Bin[]
  noise: number
}

/** Summaries of the spike runs, one row per run. */
export function spikeTable (records: readonly SpikeRecord[]): string {
  const lines = [
    '| variant | r | baseline p99 200 (ms) | worst bin p99 (ms) | back under 3 × baseline after (ms) | goodput / C in the spike | 503 in the spike | timeouts in the spike | gen lag p99 / max (ms) | sockets (C × deadline) | other CPU |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |'
  ]
  for (const r of records) {
    lines.push(`| ${r.variant} | ${r.repeat} | ${ms(r.baseP99)} | ${ms(r.maxBinP99)} | ${Number.isNaN(r.recoveryMs) ? '–' : r.recoveryMs.toFixed(0)} | ${fmt(r.spikeGoodput, 2)} | ${pct(r.spikeShed)} | ${pct(r.spikeTimeouts)} | ${ms(r.lagP99)} / ${ms(r.lagMax)}${r.lagP99 > 0.1 * r.deadlineMs ? ' ⚠ generator behind' : ''} | ${r.sockets} (${Math.round(r.cDeadline)}) | ${fmt(r.noise, 2)} |`)
  }
  return lines.join('\n')
}
