// The overload chart, hand-written SVG (no dependency): one row per work model, two panels per row
// (goodput / C, and p99 latency of the 200s, against offered load), one line per variant (medians of
// the repeats, min–max as whiskers). Lines that coincide stay readable: each variant has its own dash
// pattern and marker shape, its markers are shifted sideways by a few pixels, and its name is written at
// its line's right end, the names pushed apart vertically so they never overlap. `node --import tsx bench/overload/chart.ts <results.json> <out.svg>`
// redraws it from a results file (the tracked bench/overload/chart.svg only when named as <out.svg>).
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
const DASHES = ['', '8 3', '2 3', '8 3 2 3', '14 4', '1 3', '5 2 1 2 1 2', '10 2 4 2']
const SHAPES = ['circle', 'square', 'diamond', 'triangle', 'circle', 'square', 'diamond', 'triangle'] as const

function marker (i: number, x: number, y: number, color: string, hollow = false): string {
  const shape = SHAPES[i % SHAPES.length]!
  const fill = hollow ? 'white' : color
  const stroke = `stroke="${color}" stroke-width="${hollow ? 2 : 1}"`
  const r = hollow ? 4 : 3.5
  if (shape === 'circle') return `<circle cx="${n(x)}" cy="${n(y)}" r="${r}" fill="${fill}" ${stroke}/>`
  if (shape === 'square') return `<rect x="${n(x - r)}" y="${n(y - r)}" width="${n(2 * r)}" height="${n(2 * r)}" fill="${fill}" ${stroke}/>`
  if (shape === 'diamond') return `<polygon points="${n(x)},${n(y - r - 1)} ${n(x + r + 1)},${n(y)} ${n(x)},${n(y + r + 1)} ${n(x - r - 1)},${n(y)}" fill="${fill}" ${stroke}/>`
  return `<polygon points="${n(x)},${n(y - r - 1)} ${n(x + r + 1)},${n(y + r)} ${n(x - r - 1)},${n(y + r)}" fill="${fill}" ${stroke}/>`
}

/** y positions for labels wanted at `ys`, at least `gap` apart, kept in [lo, hi] where they fit. */
function spreadLabels (ys: number[], gap: number, lo: number, hi: number): number[] {
  const order = ys.map((y, k) => ({ y, k })).sort((a, b) => a.y - b.y)
  const out = new Array<number>(ys.length)
  let prev = -Infinity
  for (const o of order) { const y = Math.max(o.y, prev + gap, lo); out[o.k] = y; prev = y }
  // Past the bottom: shift the whole stack up (as far as the top allows).
  const over = prev - hi
  if (over > 0) for (let k = 0; k < out.length; k++) out[k] = out[k]! - over
  return out
}
const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
const n = (x: number): string => x.toFixed(1)

export function chart (input: ChartInput): string {
  const panelW = 400
  const panelH = 220
  const left = 70
  const gap = 190
  const W = left + 2 * panelW + gap + 130
  const legendRows = Math.ceil(input.variants.length / 2)
  const top = 64 + legendRows * 18
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
    const x = left + (i % 2) * 480
    const y = 60 + Math.floor(i / 2) * 18
    const color = COLORS[i % COLORS.length]!
    out.push(`<line x1="${x}" y1="${y - 4}" x2="${x + 36}" y2="${y - 4}" stroke="${color}" stroke-width="2" stroke-dasharray="${DASHES[i % DASHES.length]}"/>${marker(i, x + 18, y - 4, color)}<text x="${x + 44}" y="${y}">${esc(input.labels?.[v] ?? v)}</text>`)
  })
  const nv = input.variants.length
  const dx = (i: number): number => (i - (nv - 1) / 2) * 3
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
      const ends: Array<{ i: number, x: number, y: number }> = []
      input.variants.forEach((v, i) => {
        const color = COLORS[i % COLORS.length]!
        const pts: string[] = []
        let end: { x: number, y: number } | undefined
        for (const load of loads) {
          const cell = rs.filter((r) => r.variant === v && r.load === load)
          const s = (col === 1 ? latencySpread : spread)(cell.map(p.pick))
          const x = lx(load) + dx(i)
          if (Number.isNaN(s.median)) {
            // No 200 within the deadline at all: a hollow marker on the deadline line.
            if (col === 1 && cell.length > 0) out.push(marker(i, x, p.y(input.deadlineMs), color, true))
            continue
          }
          pts.push(`${n(x)},${n(p.y(s.median))}`)
          end = { x, y: p.y(s.median) }
          if (s.max > s.min) out.push(`<line x1="${n(x)}" y1="${n(p.y(s.min))}" x2="${n(x)}" y2="${n(p.y(s.max))}" stroke="${color}" stroke-opacity="0.5"/>`)
          out.push(marker(i, x, p.y(s.median), color))
        }
        if (pts.length > 1) out.push(`<polyline points="${pts.join(' ')}" fill="none" stroke="${color}" stroke-width="2" stroke-opacity="0.85" stroke-dasharray="${DASHES[i % DASHES.length]}"/>`)
        if (end !== undefined) ends.push({ i, ...end })
      })
      // Names at the lines' right ends, outside the panel, pushed apart so none hides another.
      const ly = spreadLabels(ends.map((e) => e.y), 12, 0, panelH)
      ends.forEach((e, k) => {
        const color = COLORS[e.i % COLORS.length]!
        const name = input.variants[e.i]!
        out.push(`<line x1="${n(panelW + 2)}" y1="${n(e.y)}" x2="${n(panelW + 10)}" y2="${n(ly[k]! - 3)}" stroke="${color}" stroke-width="1"/><text x="${n(panelW + 12)}" y="${n(ly[k]! + 1)}" font-size="10" fill="${color}">${esc(name.length > 22 ? name.slice(0, 21) + '…' : name)}</text>`)
      })
      out.push('</g>')
    })
  })
  out.push('</svg>')
  return out.join('\n') + '\n'
}

if (process.argv[1] !== undefined && import.meta.url.endsWith(process.argv[1].replace(/^.*\//, '/'))) {
  const [file, svg] = process.argv.slice(2)
  if (file === undefined || svg === undefined) throw new Error('usage: chart.ts <results-overload-*.json> <out.svg> (bench/overload/chart.svg to replace the tracked chart)')
  const results = JSON.parse(readFileSync(file, 'utf8')) as { chart: ChartInput }
  writeFileSync(svg, chart(results.chart))
  process.stderr.write(`wrote ${svg}\n`)
}
