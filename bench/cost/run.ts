// `npm run bench:cost`: instructions per request, counted by callgrind, for each variant of
// variants.ts; prints markdown tables and writes bench/results-cost-<BENCH_COST_OUT or latest>.json.
// Method: one process holds the server and the load (load.ts); the load calls os.getPriority()
// before its first request and after every N responses, and callgrind (--dump-before=uv_os_getpriority)
// writes one dump per mark; Ir/request = the last K dumps' totals over K·N. Settings (env):
//   BENCH_COST_VARIANTS=bare,admit  the variants (default: all but byDefault: false); bare and each base are added
//   BENCH_COST_REQUESTS=24000       requests per variant; BENCH_COST_MARK=1000 (N); BENCH_COST_WINDOWS=10 (K)
//   BENCH_COST_CONNECTIONS=10  BENCH_COST_CLIENTS=1000  BENCH_COST_JOBS=2 (variants at once)
//   BENCH_COST_TWIN=1               run bare a second time, last (the method's own error); 0: not
//   BENCH_COST_SEED=n               also --hash-seed=n --random-seed=n (V8's seeds fixed; off by default)
//   BENCH_COST_OUT=name  BENCH_COST_KEEP=1 (keep the callgrind files)  BENCH_COST_TIMEOUT=900 (s per variant)
import { execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { build } from 'esbuild'
import { dumpTotals } from './callgrind.js'
import type { LoadResult, LoadSpec } from './load.js'
import { costVariant, type CostVariant, VARIANTS } from './variants.js'

const here = (file: string): string => fileURLToPath(new URL(file, import.meta.url))
const root = here('../..')
const log = (line: string): void => { process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`) }

/** V8 without background compile/GC threads, a young generation fixed at 16 MB, no memory reducer. */
const NODE_FLAGS = ['--single-threaded', '--min-semi-space-size=16', '--max-semi-space-size=16', '--no-memory-reducer']
const CALLGRIND = ['--tool=callgrind', '--dump-before=uv_os_getpriority']

function num (name: string, fallback: number, min = 1): number {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value < min) throw new Error(`${name} must be an integer ≥ ${min}, got ${raw}`)
  return value
}

interface Config {
  variants: string[]
  requests: number
  markEvery: number
  windows: number
  connections: number
  clients: number
  jobs: number
  twin: boolean
  keep: boolean
  timeoutMs: number
  /** V8's hash and random seeds, fixed (0: V8's own, random per process). */
  seed: number
  out: string
}

function readConfig (): Config {
  const listed = process.env.BENCH_COST_VARIANTS
  const chosen = listed === undefined || listed.trim() === ''
    ? VARIANTS.filter((v) => v.byDefault !== false).map((v) => v.name)
    : listed.split(',').map((v) => v.trim()).filter((v) => v !== '')
  // Every variant's base runs too, bare first; the order is variants.ts's.
  const wanted = new Set(['bare', ...chosen.flatMap((name) => [costVariant(name).base ?? 'bare', name])])
  const config: Config = {
    variants: VARIANTS.map((v) => v.name).filter((name) => wanted.has(name)),
    requests: num('BENCH_COST_REQUESTS', 24_000),
    markEvery: num('BENCH_COST_MARK', 1000),
    windows: num('BENCH_COST_WINDOWS', 10),
    connections: num('BENCH_COST_CONNECTIONS', 10),
    clients: num('BENCH_COST_CLIENTS', 1000),
    jobs: num('BENCH_COST_JOBS', Math.min(2, cpus().length)),
    twin: num('BENCH_COST_TWIN', 1, 0) !== 0,
    keep: num('BENCH_COST_KEEP', 0, 0) !== 0,
    timeoutMs: num('BENCH_COST_TIMEOUT', 900) * 1000,
    seed: num('BENCH_COST_SEED', 0, 0),
    out: /^[\w.-]+$/.test(process.env.BENCH_COST_OUT ?? '') ? process.env.BENCH_COST_OUT! : 'latest'
  }
  if (config.requests % config.markEvery !== 0) throw new Error(`BENCH_COST_REQUESTS (${config.requests}) must be a multiple of BENCH_COST_MARK (${config.markEvery})`)
  const marksInRun = config.requests / config.markEvery
  if (config.windows > marksInRun - 1) throw new Error(`BENCH_COST_WINDOWS (${config.windows}) must leave at least one window of warm-up (${marksInRun} windows in a run)`)
  const warmup = config.requests - config.windows * config.markEvery
  if (warmup < 10_000) log(`warning: only ${warmup} requests of warm-up before the measured windows (V8 still compiles until ~10,000)`)
  return config
}

function valgrindVersion (): string {
  try {
    return execFileSync('valgrind', ['--version'], { encoding: 'utf8' }).trim()
  } catch (error) {
    const why = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'valgrind is not installed (apt-get install valgrind)' : String(error)
    throw new Error(`bench:cost needs valgrind's callgrind: ${why}`)
  }
}

/** The measured process's script: worker.ts and its imports bundled as plain JS (no tsx, no keepNames), dist/ and packages left as imports. */
async function bundleWorker (): Promise<string> {
  // Under node_modules (so that its package imports resolve), one file per run: worktrees that share
  // one node_modules through a link would otherwise overwrite each other's bundle mid-run.
  const outfile = join(root, `node_modules/.cache/bench-cost/worker-${process.pid}.mjs`)
  await build({
    entryPoints: [here('./worker.ts')],
    outfile,
    bundle: true,
    packages: 'external',
    platform: 'node',
    format: 'esm',
    target: 'node20',
    logLevel: 'warning',
    plugins: [{
      name: 'built-package',
      setup (b) {
        b.onResolve({ filter: /\/dist\/index\.js$/ }, (args) => ({ path: pathToFileURL(resolve(args.resolveDir, args.path)).href, external: true }))
      }
    }]
  })
  return outfile
}

interface Job { label: string, variant: CostVariant }

interface Measured {
  label: string
  variant: string
  description: string
  base: string
  /** Ir per request over the last K windows. */
  irPerRequest: number
  /** Ir per request of each of the last K windows. */
  windowIr: number[]
  /** (max − min) / mean of `windowIr`. */
  windowSpread: number
  /** Standard error of `irPerRequest` from the K windows (their standard deviation / √K). */
  standardError: number
  /** Ir of every window (all dumps between marks), per request. */
  allWindowsIr: number[]
  startupIr: number
  statuses: Record<string, number>
  wallSeconds: number
  loadSeconds: number
}

function standardError (xs: number[]): number {
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length
  const variance = xs.reduce((a, x) => a + (x - mean) ** 2, 0) / (xs.length - 1)
  return Math.sqrt(variance / xs.length)
}

function runJob (job: Job, worker: string, config: Config): Promise<Measured> {
  const dir = mkdtempSync(join(tmpdir(), `bench-cost-${job.label.replace(/\W/g, '_')}-`))
  const outFile = join(dir, 'callgrind.out')
  const logFile = join(dir, 'valgrind.log')
  const sources = job.variant.sources
  const spec: Omit<LoadSpec, 'port'> = { connections: sources ?? config.connections, clients: config.clients, requests: config.requests, markEvery: config.markEvery, ...(sources === undefined ? {} : { sources }) }
  const args = [...CALLGRIND, `--callgrind-out-file=${outFile}`, `--log-file=${logFile}`, process.execPath, ...NODE_FLAGS, ...(config.seed === 0 ? [] : [`--hash-seed=${config.seed}`, `--random-seed=${config.seed}`]), worker, job.variant.name, JSON.stringify(spec)]
  const t0 = performance.now()
  return new Promise<Measured>((resolvePromise, reject) => {
    const child = spawn('valgrind', args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => { out += chunk })
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => { err += chunk })
    const timer = setTimeout(() => { child.kill('SIGKILL') }, config.timeoutMs)
    const fail = (why: string): void => {
      let valgrindLog = ''
      try { valgrindLog = readFileSync(logFile, 'utf8').trim().split('\n').slice(-15).join('\n') } catch {}
      reject(new Error(`${job.label}: ${why}\n--- stderr:\n${err.trim().split('\n').slice(-15).join('\n')}\n--- ${logFile}:\n${valgrindLog}\n--- command: valgrind ${args.join(' ')}`))
    }
    child.once('error', (error) => { clearTimeout(timer); fail(`cannot start valgrind: ${String(error)}`) })
    child.once('exit', (code, signal) => {
      clearTimeout(timer)
      const wallSeconds = (performance.now() - t0) / 1000
      if (code !== 0) { fail(`exited with ${code ?? signal}${signal === 'SIGKILL' ? ` (killed after ${config.timeoutMs / 1000} s)` : ''}`); return }
      try {
        const result = JSON.parse(out.trim().split('\n').pop() ?? '') as LoadResult
        const totals = dumpTotals(outFile)
        // Dump 1: start-up to the first mark; dump i + 1: window i (N responses); then the exit dump.
        if (totals.length !== result.marks) throw new Error(`${totals.length} dumps for ${result.marks} marks (did something else call uv_os_getpriority?)`)
        const windows = totals.slice(1)
        const last = windows.slice(-config.windows)
        const windowIr = last.map((ir) => ir / config.markEvery)
        const statuses: Record<string, number> = {}
        for (const w of result.windows.slice(-config.windows)) for (const [code, n] of Object.entries(w)) statuses[code] = (statuses[code] ?? 0) + n
        const expected = String(job.variant.status)
        if (Object.keys(statuses).some((code) => code !== expected)) throw new Error(`expected only ${expected} in the measured windows, got ${JSON.stringify(statuses)}`)
        const irPerRequest = last.reduce((a, b) => a + b, 0) / (config.windows * config.markEvery)
        if (!config.keep) rmSync(dir, { recursive: true, force: true })
        resolvePromise({
          label: job.label,
          variant: job.variant.name,
          description: job.variant.description,
          base: job.variant.base ?? 'bare',
          irPerRequest,
          windowIr,
          windowSpread: (Math.max(...windowIr) - Math.min(...windowIr)) / irPerRequest,
          standardError: standardError(windowIr),
          allWindowsIr: windows.map((ir) => ir / config.markEvery),
          startupIr: totals[0]!,
          statuses,
          wallSeconds,
          loadSeconds: result.seconds
        })
      } catch (error) {
        fail(error instanceof Error ? error.message : String(error))
      }
    })
  })
}

async function runAll (jobs: Job[], worker: string, config: Config): Promise<Measured[]> {
  const results = new Map<string, Measured>()
  const errors: Error[] = []
  let next = 0
  const lane = async (): Promise<void> => {
    while (next < jobs.length) {
      const job = jobs[next++]!
      log(`start ${job.label}`)
      try {
        const m = await runJob(job, worker, config)
        results.set(job.label, m)
        log(`done  ${job.label}: ${Math.round(m.irPerRequest).toLocaleString('en-US')} Ir/request (windows ±${(m.windowSpread * 50).toFixed(2)} %), ${m.wallSeconds.toFixed(0)} s`)
      } catch (error) {
        errors.push(error as Error)
        log(`FAILED ${job.label}: ${(error as Error).message}`)
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(config.jobs, jobs.length) }, lane))
  if (errors.length > 0 && results.size === 0) throw new Error(`every variant failed; first: ${errors[0]!.message}`)
  return jobs.flatMap((job) => results.get(job.label) ?? [])
}

const int = (n: number): string => Math.round(n).toLocaleString('en-US')
const signed = (n: number): string => (n >= 0 ? '+' : '−') + int(Math.abs(n))
const fixed = (n: number, digits = 2): string => Number.isFinite(n) ? n.toFixed(digits) : 'n/a'

function costTable (rows: Measured[], ir: (label: string) => number | undefined): string {
  const lines = [
    '| variant | Ir/request | ± s.e. | Δ over base | × base | base | windows (max − min) / mean |',
    '|---|---:|---:|---:|---:|---|---:|'
  ]
  for (const r of rows) {
    const base = r.label === r.base ? undefined : ir(r.base)
    const se = r.standardError ?? standardError(r.windowIr)
    lines.push(`| ${r.label} — ${r.description} | ${int(r.irPerRequest)} | ${int(se)} (${fixed(se / r.irPerRequest * 100)} %) | ${base === undefined ? '—' : signed(r.irPerRequest - base)} | ${base === undefined ? '—' : fixed(r.irPerRequest / base, 3)} | ${r.label === r.base ? '—' : r.base} | ${fixed(r.windowSpread * 100)} % |`)
  }
  return lines.join('\n')
}

interface Ratio { label: string, value: number }

function ratios (ir: (label: string) => number | undefined): Ratio[] {
  const out: Ratio[] = []
  const added = (name: string): number | undefined => {
    const v = ir(name)
    const b = ir(costVariant(name).base ?? 'bare')
    return v === undefined || b === undefined ? undefined : v - b
  }
  const push = (label: string, a: number | undefined, b: number | undefined): void => {
    if (a !== undefined && b !== undefined) out.push({ label, value: a / b })
  }
  push('repeatability: bare (second run) / bare', ir('bare#2'), ir('bare'))
  push('admitting, added cost: fastify-admission / @fastify/rate-limit', added('admit'), added('rl-admit'))
  push('refusing, added cost: fastify-admission / @fastify/rate-limit', added('refuse'), added('rl-refuse'))
  push('admitting, logger: true, added cost: fastify-admission / @fastify/rate-limit', added('admit-log'), added('rl-admit-log'))
  push('refusing, logger: true, added cost: fastify-admission / @fastify/rate-limit', added('refuse-log'), added('rl-refuse-log'))
  push('fastify-admission admitting, added cost / empty onRequest + onResponse (route options)', added('admit'), added('hooks-route'))
  push('fastify-admission admitting, added cost / empty onRequest + onResponse (app.addHook)', added('admit'), added('hooks-app'))
  push('fastify-admission refusing, added cost / admitting', added('refuse'), added('admit'))
  for (const name of ['admit', 'refuse', 'rl-admit', 'rl-refuse', 'under-pressure', 'optout']) push(`total: ${name} / bare`, ir(name), ir('bare'))
  for (const name of ['admit-log', 'refuse-log', 'rl-admit-log', 'rl-refuse-log']) push(`total: ${name} / bare-log`, ir(name), ir('bare-log'))
  const bare = ir('bare')
  const floor = ir('load-only')
  if (bare !== undefined && floor !== undefined) {
    push('server share of bare: (bare − load-only) / bare', bare - floor, bare)
    push('fastify-admission admitting, added / server share of bare (bare − load-only)', added('admit'), bare - floor)
    push('fastify-admission refusing, added / server share of bare (bare − load-only)', added('refuse'), bare - floor)
  }
  const http = ir('node-http')
  if (bare !== undefined && http !== undefined && floor !== undefined) push("Fastify's own share of bare: (bare − node-http) / (bare − load-only)", bare - http, bare - floor)
  return out
}

function ratioTable (rs: Ratio[]): string {
  return ['| ratio | value |', '|---|---:|', ...rs.map((r) => `| ${r.label} | ${fixed(r.value, 3)} |`)].join('\n')
}

function version (pkg: string): string {
  return (JSON.parse(readFileSync(join(root, 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string }).version
}

function git (args: string[]): string {
  try { return execFileSync('git', args, { cwd: root, encoding: 'utf8' }).trim() } catch { return 'unknown' }
}

interface Saved { command: string, commit: string, valgrind: string, node: string, config: Config, minutes: number, results: Measured[] }

// BENCH_COST_FROM=bench/results-cost-latest.json: print that run's tables again, run nothing.
const from = process.env.BENCH_COST_FROM
const saved = from === undefined || from === '' ? undefined : JSON.parse(readFileSync(from, 'utf8')) as Saved
const config = saved?.config ?? readConfig()
const valgrind = saved?.valgrind ?? valgrindVersion()
const jobs: Job[] = config.variants.map((name) => ({ label: name, variant: costVariant(name) }))
if (config.twin) jobs.push({ label: 'bare#2', variant: costVariant('bare') })
const started = Date.now()
let rows: Measured[]
if (saved === undefined) {
  const worker = await bundleWorker()
  log(`${valgrind}, node ${process.version}; ${jobs.length} runs, ${config.jobs} at once; ${config.requests} requests each, Ir/request over the last ${config.windows} × ${config.markEvery}`)
  try {
    rows = await runAll(jobs, worker, config)
  } finally {
    rmSync(worker, { force: true })
  }
} else {
  rows = saved.results
}
const minutes = saved?.minutes ?? (Date.now() - started) / 60_000
const byLabel = new Map(rows.map((r) => [r.label, r.irPerRequest]))
const ir = (label: string): number | undefined => byLabel.get(label)
const command = saved?.command ?? `${Object.entries(process.env).filter(([k]) => k.startsWith('BENCH_COST_')).map(([k, v]) => `${k}=${v ?? ''} `).join('')}npm run bench:cost`

const rs = ratios(ir)
process.stdout.write([
  `### Instructions per request (callgrind; ${config.requests} requests per variant, ${config.connections} keep-alive connections, ${config.clients} client ids; Ir/request over the last ${config.windows} × ${config.markEvery})`,
  '',
  costTable(rows, ir),
  '',
  ratioTable(rs),
  '',
  `\`${command}\`: ${valgrind}, node ${saved?.node ?? process.version}, fastify ${version('fastify')}, @fastify/rate-limit ${version('@fastify/rate-limit')}, @fastify/under-pressure ${version('@fastify/under-pressure')}; commit ${saved === undefined ? git(['rev-parse', '--short', 'HEAD']) + (git(['status', '--porcelain', '--', 'lib', 'bench']) === '' ? '' : ' (uncommitted changes)') : saved.commit.slice(0, 7)}; ${fixed(minutes, 1)} min, ${config.jobs} at once`,
  ''
].join('\n'))

if (saved !== undefined) process.exit(0)
const file = join(root, `bench/results-cost-${config.out}.json`)
writeFileSync(file, JSON.stringify({
  date: new Date().toISOString(),
  command,
  commit: git(['rev-parse', 'HEAD']),
  node: process.version,
  valgrind,
  nodeFlags: NODE_FLAGS,
  callgrind: CALLGRIND,
  versions: { fastify: version('fastify'), '@fastify/rate-limit': version('@fastify/rate-limit'), '@fastify/under-pressure': version('@fastify/under-pressure') },
  config,
  minutes,
  results: rows,
  ratios: rs
}, null, 2) + '\n')
log(`wrote ${file}`)
if (rows.length < jobs.length) { log(`${jobs.length - rows.length} of ${jobs.length} runs failed (see above)`); process.exitCode = 1 }
