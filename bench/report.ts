// Markdown tables of a summary.
import type { Check, VariantSummary } from './summary.js'

const int = (n: number): string => Math.round(n).toLocaleString('en-US')
const fixed = (n: number, digits = 2): string => Number.isFinite(n) ? n.toFixed(digits) : 'n/a'
const pct = (n: number): string => Number.isFinite(n) ? `${Math.round(n * 100)} %` : 'n/a'

function bound (c: Check, format: (n: number) => string): string {
  if (c.min !== undefined) return `≥ ${format(c.min)}`
  if (c.max !== undefined) return `≤ ${format(c.max)}`
  return '—'
}

export function httpTable (rows: VariantSummary[]): string {
  const lines = [
    '| variant | req/s (median) | ratio to bare (median) | middle half of rounds | +µs/req vs bare | target | pass/fail | server core busy | load CPU | max noise |',
    '|---|---:|---:|---:|---:|---|---|---:|---:|---:|'
  ]
  for (const r of rows) {
    const target = r.checks.map((c) => `${bound(c, (n) => fixed(n))} ${c.label}` + (c.label === '× bare' ? '' : ` (median ${fixed(c.value)})`)).join('; ') || '—'
    const pass = r.checks.map((c) => (c.pass ? 'pass' : 'FAIL')).join(', ') || '—'
    const extra = r.name === 'bare' ? '—' : fixed(r.extraMicros)
    const spread = r.name === 'bare' ? '—' : `${fixed(r.ratioQuartiles[0])}–${fixed(r.ratioQuartiles[1])}`
    lines.push(`| ${r.name} — ${r.description} | ${int(r.medianRps)} | ${fixed(r.medianRatio)} | ${spread} | ${extra} | ${target} | ${pass} | ${pct(r.medianServerCoreBusy)} | ${pct(r.medianLoadCpu)} | ${pct(r.maxNoise)} |`)
  }
  return lines.join('\n')
}

export function microTable (checks: Check[]): string {
  const lines = ['| measure | value | target | pass/fail |', '|---|---:|---|---|']
  for (const c of checks) {
    const format = c.value > 1e5 ? (n: number): string => `${fixed(n / 1e6, 1)} M` : (n: number): string => fixed(n, 1)
    lines.push(`| ${c.label} | ${format(c.value)} | ${bound(c, format)} | ${c.min === undefined && c.max === undefined ? '—' : c.pass ? 'pass' : 'FAIL'} |`)
  }
  return lines.join('\n')
}
