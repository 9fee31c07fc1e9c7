import { createHash } from 'node:crypto'
import { PAGE_SCRIPT } from './page-script.js'

const STYLE = `
:root { color-scheme: light dark; --fg: #1d2330; --muted: #667085; --line: #d6dae3; --card: #f6f7fa; --limit: #2f6fd6; --flight: #e07a1f; --bad: #c4322b; --good: #1f8a4c }
@media (prefers-color-scheme: dark) { :root { --fg: #e6e9ef; --muted: #98a2b3; --line: #343a46; --card: #1c2029; --limit: #6b9cff; --flight: #f3a35c; --bad: #ff7a70; --good: #5ccf8a } body { background: #12151b } }
* { box-sizing: border-box }
body { margin: 0 auto; max-width: 980px; padding: 20px 24px 40px; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg) }
header { display: flex; align-items: baseline; justify-content: space-between; gap: 16px; border-bottom: 1px solid var(--line); padding-bottom: 8px }
h1 { font-size: 18px; margin: 0 } h2 { font-size: 14px; margin: 24px 0 8px; color: var(--muted); font-weight: 600; text-transform: uppercase; letter-spacing: .04em }
#status { font-size: 13px } #status.ok { color: var(--good) } #status.down { color: var(--bad) }
.cards { display: grid; grid-template-columns: repeat(4, 1fr); gap: 12px; margin-top: 16px }
.card { background: var(--card); border-radius: 8px; padding: 10px 14px }
.card .label { color: var(--muted); font-size: 12px } .card .value { font-size: 24px; font-variant-numeric: tabular-nums }
.card .of { color: var(--muted); font-size: 14px }
svg { display: block; width: 100%; height: 150px; background: var(--card); border-radius: 8px }
polyline { fill: none; stroke-width: 2; vector-effect: non-scaling-stroke } polyline.limit { stroke: var(--limit) } polyline.in-flight { stroke: var(--flight) }
.chart { position: relative } .axis { position: absolute; left: 6px; color: var(--muted); font-size: 11px } .axis.top { top: 10px } .axis.bottom { bottom: 14px }
.grid { stroke: var(--line); stroke-width: 1; vector-effect: non-scaling-stroke }
.legend { display: flex; gap: 16px; color: var(--muted); font-size: 12px; margin-top: 4px }
.legend span::before { content: ""; display: inline-block; width: 12px; height: 3px; margin-right: 6px; vertical-align: middle }
.legend .limit::before { background: var(--limit) } .legend .in-flight::before { background: var(--flight) }
table { width: 100%; border-collapse: collapse; font-variant-numeric: tabular-nums }
th, td { padding: 5px 8px; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap }
th { color: var(--muted); font-weight: 600; font-size: 12px } th:first-child, td.name { text-align: left }
td.name { max-width: 420px; overflow: hidden; text-overflow: ellipsis; font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 13px }
td.empty { text-align: left; color: var(--muted) }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 24px }
`

const BODY = `
<header><h1>fastify-admission &middot; live</h1><span id="status">waiting for data</span></header>
<section class="cards">
<div class="card"><div class="label">in flight</div><div class="value"><span id="in-flight">&ndash;</span> <span class="of">of <span id="limit">&ndash;</span></span></div></div>
<div class="card"><div class="label">admitted / s</div><div class="value" id="admitted-rate">&ndash;</div></div>
<div class="card"><div class="label">limited (429) / s</div><div class="value" id="limited-rate">&ndash;</div></div>
<div class="card"><div class="label">shed (503) / s</div><div class="value" id="shed-rate">&ndash;</div></div>
</section>
<h2>In flight against the limit, last minute</h2>
<div class="chart"><svg viewBox="0 0 600 140" preserveAspectRatio="none" role="img" aria-label="the in-flight limit and the requests in flight over the last minute">
<line class="grid" x1="0" y1="10" x2="600" y2="10"/><line class="grid" x1="0" y1="130" x2="600" y2="130"/>
<g id="lines"></g>
</svg><span class="axis top" id="chart-max"></span><span class="axis bottom">0</span></div>
<div class="legend"><span class="limit" id="legend-limit">limit</span><span class="in-flight">in flight</span><span>60 s &rarr; now</span></div>
<h2>Routes</h2>
<table><thead><tr><th>route</th><th>admitted/s</th><th>limited/s</th><th>shed/s</th><th>in flight</th><th>admitted</th><th>limited</th><th>shed</th></tr></thead><tbody id="routes"></tbody></table>
<div class="pair">
<div><h2>Refusals by reason</h2><table><thead><tr><th>reason</th><th>/s</th><th>total</th></tr></thead><tbody id="reasons"></tbody></table></div>
<div><h2>Top offenders, last minute</h2><table><thead><tr><th>client key</th><th>refused</th></tr></thead><tbody id="offenders"></tbody></table></div>
</div>
`

function sha256 (text: string): string {
  return `'sha256-${createHash('sha256').update(text).digest('base64')}'`
}

/** The live page: one document, its style and script inline; the same bytes for every request. */
export const PAGE_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer"><link rel="icon" href="data:,">
<title>fastify-admission &middot; live</title>
<style>${STYLE}</style></head>
<body>${BODY}<script>${PAGE_SCRIPT}</script></body></html>
`

/**
 * Nothing loads but the page itself and its data: the inline style and script by their hashes
 * (no other inline code, none from elsewhere), `fetch` to this origin only, no frame may hold it.
 */
export const PAGE_CSP = [
  "default-src 'none'",
  `script-src ${sha256(PAGE_SCRIPT)}`,
  `style-src ${sha256(STYLE)}`,
  "connect-src 'self'",
  'img-src data:',
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'"
].join('; ')
