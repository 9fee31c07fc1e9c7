// The Redis bench's summary: per-cell and per-variant medians over rounds, per-round ratios of
// this plugin to @fastify/rate-limit (median and range), the issue's targets, markdown tables.
import { median } from '../stats.js'
import type { CellRun, DecisionResult } from './decisions.js'
import type { HttpRound } from './http-rounds.js'
import { innerCommands, scriptCounters } from './redis-info.js'

const fixed = (n: number, digits = 2): string => Number.isFinite(n) ? n.toFixed(digits) : 'n/a'
const int = (n: number): string => Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a'
const range = (values: number[]): string => values.length === 0 ? 'n/a' : `${fixed(Math.min(...values))}–${fixed(Math.max(...values))}`

export interface Target {
  label: string
  /** Per-round ratios (this plugin / @fastify/rate-limit), or per-round values; the target is on their median. */
  ratios: number[]
  min?: number
  max?: number
}

const pass = (t: Target): boolean => {
  const m = median(t.ratios)
  return (t.min === undefined || m >= t.min) && (t.max === undefined || m <= t.max)
}

/** Per decision: Redis's whole-server CPU (µs), script time (µs), script calls. */
function perDecision (run: CellRun): { cpu: number, script: number, perCall: number, calls: number } {
  const script = scriptCounters(run.redis)
  return {
    cpu: run.redis.cpuSeconds * 1e6 / run.decisions,
    script: script.usec / run.decisions,
    perCall: script.calls === 0 ? Number.NaN : script.usec / script.calls,
    calls: script.calls / run.decisions
  }
}

export function decisionTable (result: DecisionResult): string {
  const names = [...new Set(result.runs.map((r) => r.name))]
  const lines = [
    '| cell | decisions/s (client) | client CPU µs per decision | script µs per call (`usec_per_call`) | script µs per decision | Redis CPU µs per decision (`INFO cpu`) | script calls per decision | commands inside the script, µs per call |',
    '|---|---:|---:|---:|---:|---:|---:|---|'
  ]
  for (const name of names) {
    const runs = result.runs.filter((r) => r.name === name)
    const d = runs.map(perDecision)
    const last = runs.at(-1)!
    const inner = Object.entries(innerCommands(last.redis)).filter(([, c]) => c.calls >= last.decisions / 100)
      .map(([command, c]) => `${command} ${fixed(c.usec / c.calls)}`).join(', ')
    lines.push(`| ${name} | ${int(median(runs.map((r) => r.decisions / r.seconds)))} | ${fixed(median(runs.map((r) => r.clientCpuSeconds * 1e6 / r.decisions)))} | ${fixed(median(d.map((x) => x.perCall)))} | ${fixed(median(d.map((x) => x.script)))} | ${fixed(median(d.map((x) => x.cpu)))} (${range(d.map((x) => x.cpu))}) | ${fixed(median(d.map((x) => x.calls)), 4)} | ${inner || '—'} |`)
  }
  return lines.join('\n')
}

/** Per-round ratio of a decision measure of cell `ours` to cell `theirs` (same round). */
export function decisionRatios (result: DecisionResult, ours: string, theirs: string, pick: (run: CellRun) => number): number[] {
  const rounds = [...new Set(result.runs.map((r) => r.round))]
  return rounds.map((round) => {
    const find = (name: string): CellRun => result.runs.find((r) => r.round === round && r.name === name)!
    return pick(find(ours)) / pick(find(theirs))
  })
}

export const redisCpuPerDecision = (run: CellRun): number => perDecision(run).cpu
/** A decision measure of cell `name`, per round. */
export function decisionValues (result: DecisionResult, name: string, pick: (run: CellRun) => number): number[] {
  return result.runs.filter((r) => r.name === name).map(pick)
}

/** Script calls per decision. */
export const scriptCallsPerDecision = (run: CellRun): number => perDecision(run).calls

export function httpTable (rounds: HttpRound[], versus: Record<string, string>): string {
  const names = Object.keys(rounds[0] ?? {})
  const lines = [
    '| variant | req/s (median) | × @fastify/rate-limit, same round (median, range) | Redis CPU µs per request | script calls per request | server CPU µs per request | p99 ms |',
    '|---|---:|---:|---:|---:|---:|---:|'
  ]
  const order = [...names].sort((a, b) => a.replace(/^rl-/, '').localeCompare(b.replace(/^rl-/, '')) || (a.startsWith('rl-') ? 1 : -1))
  for (const name of order) {
    const runs = rounds.map((round) => round[name]!)
    const other = versus[name]
    const ratios = other === undefined ? [] : httpRatios(rounds, name, other)
    lines.push(`| ${name} | ${int(median(runs.map((r) => r.rps)))} | ${other === undefined ? '—' : `${fixed(median(ratios))} (${range(ratios)}) vs ${other}`} | ${fixed(median(runs.map((r) => r.redisCpu * 1e6 / r.total)))} | ${fixed(median(runs.map((r) => r.scriptCalls / r.total)), 4)} | ${fixed(median(runs.map((r) => r.serverCpu * 1e6 / r.total)))} | ${fixed(median(runs.map((r) => r.latencyP99)), 0)} |`)
  }
  return lines.join('\n')
}

export function httpRatios (rounds: HttpRound[], ours: string, theirs: string): number[] {
  return rounds.map((round) => round[ours]!.rps / round[theirs]!.rps)
}

export function targetTable (targets: Target[]): string {
  const lines = ['| target | measured (median of rounds, range) | pass/fail |', '|---|---:|---|']
  for (const t of targets) {
    const bound = t.min !== undefined ? `≥ ${fixed(t.min)}` : `≤ ${fixed(t.max!)}`
    lines.push(`| ${t.label} ${bound} | ${fixed(median(t.ratios))} (${range(t.ratios)}) | ${pass(t) ? 'pass' : 'FAIL'} |`)
  }
  return lines.join('\n')
}
