// The overload chart, hand-written SVG (no dependency): one row per work model, two panels per row
// (goodput / C, and p99 latency of the 200s, against offered load), one line per variant (medians of
// the repeats, min–max as whiskers). `node --import tsx bench/overload/chart.ts <results.json> [out.svg]`
// redraws it from a results file.
import { readFileSync, writeFileSync } from 'node:fs'
import type { CellRecord } from './report.js'
import { latencySpread, spread } from './stats.js'
import type { ModelName } from './work.js'

export interface ChartInput {
  records: readonly CellRecord[]
  models: readonly ModelName[]
  variants: readonly string[]
  loads: readonly number[]
  capacity: Partial<Record<ModelName, number>>
  deadlineMs: number
  note: string
  /** Legend text per variant, where it differs from the name. */
  labels?: Record<string, string>
}

const COLORS = ['#444444', '#1f77b4', '#17becf', '#2ca02c', '#d62728', '#9467bd', '#ff7f0e', '#8c564b']
const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
const n = (x: number): string => x.toFixed(1)

export function chart (input: ChartInput): string {
  const W = 1030
  const panelW = 400
  const panelH = 220
  const left = 70
  const gap = 110
  const top = 100
  const rowH = panelH + 90
  const H = top + rowH * input.models.length + 10
  const loads = [...input.loads].sort((a, b) => a - b)
  const lx = (load: number): number => {
    const a = Math.log2(loads[0]!)
    const b = Math.log2(loads[loads.length - 1]!)
    return b === a ? panelW / 2 : (Math.log2(load) - a) / (b - a) * panelW
  }
  const out: string[] = []
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`)
  out.push(`<rect width="${W}" height="${H}" fill="white"/>`)
  out.push(`<text x="${left}" y="22" font-size="15" font-weight="bold">fastify-admission overload benchmark: open loop, ${input.deadlineMs} ms client deadline</text>`)
  out.push(`<text x="${left}" y="40" fill="#555">${esc(input.note)}</text>`)
  input.variants.forEach((v, i) => {
    const x = left + (i % 3) * 300
    const y = 60 + Math.floor(i / 3) * 16
    out.push(`<line x1="${x}" y1="${y - 4}" x2="${x + 22}" y2="${y - 4}" stroke="${COLORS[i % COLORS.length]}" stroke-width="3"/><text x="${x + 28}" y="${y}">${esc(input.labels?.[v] ?? v)}</text>`)
  })
  input.models.forEach((model, row) => {
    const y0 = top + row * rowH + 20
    const rs = input.records.filter((r) => r.model === model)
    const maxGood = Math.max(1.2, ...rs.map((r) => r.goodput).filter((x) => typeof x === 'number' && Number.isFinite(x)))
    const minP = 1
    const maxP = Math.max(input.deadlineMs, ...rs.map((r) => r.okP99).filter((x) => typeof x === 'number' && Number.isFinite(x)))
    const panels = [
      { title: `${model}: goodput / C (C = ${Math.round(input.capacity[model] ?? Number.NaN)} req/s)`, pick: (r: CellRecord) => r.goodput, y: (v: number) => panelH - v / maxGood * panelH, ticks: maxGood > 2 ? [0, 0.5, 1, ...Array.from({ length: Math.floor(maxGood) - 1 }, (_, k) => k + 2)] : [0, 0.25, 0.5, 0.75, 1, 1.5].filter((t) => t <= maxGood), label: (v: number) => v.toFixed(2) },
      { title: `${model}: p99 latency of 200s (ms, log)`, pick: (r: CellRecord) => r.okP99, y: (v: number) => panelH - (Math.log10(Math.max(v, minP)) - Math.log10(minP)) / (Math.log10(maxP) - Math.log10(minP)) * panelH, ticks: [1, 10, 100, 1000].filter((t) => t <= maxP), label: (v: number) => String(v) }
    ]
    panels.forEach((p, col) => {
      const x0 = left + col * (panelW + gap)
      out.push(`<g transform="translate(${x0},${y0})">`)
      out.push(`<text x="0" y="-8" font-weight="bold">${esc(p.title)}</text>`)
      out.push(`<rect x="0" y="0" width="${panelW}" height="${panelH}" fill="none" stroke="#999"/>`)
      for (const t of p.ticks) {
        const y = p.y(t)
        out.push(`<line x1="0" y1="${n(y)}" x2="${panelW}" y2="${n(y)}" stroke="#e5e5e5"/><text x="-6" y="${n(y + 4)}" text-anchor="end">${p.label(t)}</text>`)
      }
      if (col === 0) out.push(`<line x1="0" y1="${n(p.y(1))}" x2="${panelW}" y2="${n(p.y(1))}" stroke="#999" stroke-dasharray="4 3"/>`)
      else out.push(`<line x1="0" y1="${n(p.y(input.deadlineMs))}" x2="${panelW}" y2="${n(p.y(input.deadlineMs))}" stroke="#999" stroke-dasharray="4 3"/><text x="${panelW - 4}" y="${n(p.y(input.deadlineMs) - 4)}" text-anchor="end" fill="#777">deadline</text>`)
      for (const load of loads) out.push(`<text x="${n(lx(load))}" y="${panelH + 16}" text-anchor="middle">${load} C</text>`)
      out.push(`<text x="${panelW / 2}" y="${panelH + 34}" text-anchor="middle" fill="#555">offered load (log scale)${col === 1 ? '; hollow: no 200 within the deadline' : ''}</text>`)
      input.variants.forEach((v, i) => {
        const color = COLORS[i % COLORS.length]
        const pts: string[] = []
        for (const load of loads) {
          const cell = rs.filter((r) => r.variant === v && r.load === load)
          const s = (col === 1 ? latencySpread : spread)(cell.map(p.pick))
          const x = lx(load)
          if (Number.isNaN(s.median)) {
            // No 200 within the deadline at all: a hollow marker on the deadline line.
            if (col === 1 && cell.length > 0) out.push(`<circle cx="${n(x)}" cy="${n(p.y(input.deadlineMs))}" r="4" fill="white" stroke="${color}" stroke-width="2"/>`)
            continue
          }
          pts.push(`${n(x)},${n(p.y(s.median))}`)
          if (s.max > s.min) out.push(`<line x1="${n(x)}" y1="${n(p.y(s.min))}" x2="${n(x)}" y2="${n(p.y(s.max))}" stroke="${color}" stroke-opacity="0.5"/>`)
          out.push(`<circle cx="${n(x)}" cy="${n(p.y(s.median))}" r="3" fill="${color}"/>`)
        }
        if (pts.length > 1) out.push(`<polyline points="${pts.join(' ')}" fill="none" stroke="${color}" stroke-width="2"/>`)
      })
      out.push('</g>')
    })
  })
  out.push('</svg>')
  return out.join('\n') + '\n'
}

if (process.argv[1] !== undefined && import.meta.url.endsWith(process.argv[1].replace(/^.*\//, '/'))) {
  const [file, svg = 'bench/overload/chart.svg'] = process.argv.slice(2)
  if (file === undefined) throw new Error('usage: chart.ts <results-overload-*.json> [out.svg]')
  const results = JSON.parse(readFileSync(file, 'utf8')) as { chart: ChartInput }
  writeFileSync(svg, chart(results.chart))
  process.stderr.write(`wrote ${svg}\n`)
}
