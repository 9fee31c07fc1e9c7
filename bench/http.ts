// The HTTP runs: one pinned server per variant (core 0), one pinned load child for all runs (core 1).
import type { ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { nextMessage, startPinned } from './child.js'
import type { BenchConfig } from './config.js'
import { type CoreTime, waitForQuiet } from './cpu-noise.js'
import type { LoadResult, LoadSpec } from './load.js'
import { variant } from './variants.js'

export const SERVER_CORE = 0
export const LOAD_CORE = 1
const serverScript = fileURLToPath(new URL('./server.ts', import.meta.url))
const loadScript = fileURLToPath(new URL('./load.ts', import.meta.url))

export interface Server { name: string, port: number, child: ChildProcess }

/** The load generator: one process that runs every load, so runs can be short and close together. */
export interface Load { child: ChildProcess }

export function startLoad (core = LOAD_CORE): Load {
  return { child: startPinned({ core, script: loadScript, ipc: true }) }
}

/** One load run on the load child (bench/load.ts). */
export async function runLoad (load: Load, spec: LoadSpec): Promise<LoadResult> {
  load.child.send(spec)
  const reply = await nextMessage(load.child, (m) => {
    const r = m as { result?: LoadResult, error?: string }
    return r.result !== undefined || r.error !== undefined ? r : undefined
  }, (spec.seconds + 60) * 1000)
  if (reply.result === undefined) throw new Error(`load on port ${spec.port}: ${reply.error ?? 'no result'}`)
  return reply.result
}

export interface RunResult extends LoadResult {
  /** Server process CPU over the load's run (1 = its core saturated by the server alone). */
  serverCpu: number
  /** Share of the server's core not idle during the run (server, its network interrupts, others). */
  serverCoreBusy: number
  /** The largest share of a core that other processes took during the run (NaN if unknown). */
  noise: number
  attempts: number
}

export async function startServer (name: string, keys: number, core = SERVER_CORE): Promise<Server> {
  const child = startPinned({ core, script: serverScript, args: [name, String(keys)], ipc: true })
  const port = await nextMessage(child, (m) => (m as { port?: number }).port, 60_000)
  return { name, port, child }
}

/** The server process's CPU time so far (user + system), in seconds. */
export async function serverCpuSeconds (server: Server): Promise<number> {
  server.child.send('cpu')
  const cpu = await nextMessage(server.child, (m) => (m as { cpu?: NodeJS.CpuUsage }).cpu, 10_000)
  return (cpu.user + cpu.system) / 1e6
}

async function runOnce (server: Server, load: Load, config: BenchConfig, seconds: number): Promise<RunResult> {
  await waitForQuiet(0.1, config.quietWaitMs)
  const spec: LoadSpec = { port: server.port, seconds, connections: config.connections, pipelining: config.pipelining, keys: config.keys }
  const cpu0 = await serverCpuSeconds(server)
  const result = await runLoad(load, spec)
  // The server idles while the clients connect, so its CPU time is that of the run.
  const serverCpu = (await serverCpuSeconds(server)) - cpu0
  const s = result.runSeconds
  const core = (i: number): CoreTime | undefined => result.cores?.[i]
  const server0 = core(SERVER_CORE)
  const load1 = core(LOAD_CORE)
  const noise = server0 === undefined || load1 === undefined
    ? Number.NaN
    : Math.max(0, (server0.busy - serverCpu) / s, (load1.busy - result.cpu * s) / s)
  const serverCoreBusy = server0 === undefined ? Number.NaN : 1 - server0.idle / s
  return { ...result, serverCpu: serverCpu / s, serverCoreBusy, noise, attempts: 1 }
}

/**
 * How far a run is from a clean measurement: other processes on the cores, or a server core with
 * idle time (then the load, not the server, set the pace). 0 for a clean run; NaN counts as clean.
 */
function flaw (run: RunResult, config: BenchConfig): number {
  const noise = Number.isNaN(run.noise) ? 0 : Math.max(0, run.noise - config.maxNoise)
  const idle = Number.isNaN(run.serverCoreBusy) ? 0 : Math.max(0, config.minServerBusy - run.serverCoreBusy)
  return noise + idle
}

/** One measured run; a flawed run is repeated (up to `config.retries` times) and the least flawed kept. */
export async function measure (server: Server, load: Load, config: BenchConfig, seconds: number): Promise<RunResult> {
  let best = await runOnce(server, load, config, seconds)
  check(server.name, best)
  let attempts = 1
  while (flaw(best, config) > 0 && attempts <= config.retries) {
    const run = await runOnce(server, load, config, seconds)
    check(server.name, run)
    attempts++
    if (flaw(run, config) < flaw(best, config)) best = run
  }
  return { ...best, attempts }
}

/** Throws unless every response of the run had the variant's status, with no error or timeout. */
export function check (name: string, run: LoadResult): void {
  const expected = String(variant(name).status)
  const others = Object.keys(run.statusCodes).filter((code) => code !== expected)
  if (others.length > 0 || run.errors > 0 || run.timeouts > 0 || run.total === 0) {
    throw new Error(`${name}: expected only ${expected}, got ${JSON.stringify(run.statusCodes)}, ${run.errors} errors, ${run.timeouts} timeouts`)
  }
}

/** Two or more runs of one server as one: counts and times added, shares weighted by time. */
export function merged (runs: readonly RunResult[]): RunResult {
  const seconds = runs.reduce((sum, r) => sum + r.runSeconds, 0)
  const total = runs.reduce((sum, r) => sum + r.total, 0)
  const weighted = (pick: (r: RunResult) => number): number => runs.reduce((sum, r) => sum + pick(r) * r.runSeconds, 0) / seconds
  const statusCodes: Record<string, number> = {}
  for (const r of runs) for (const [code, n] of Object.entries(r.statusCodes)) statusCodes[code] = (statusCodes[code] ?? 0) + n
  return {
    rps: total / seconds,
    total,
    seconds: runs.reduce((sum, r) => sum + r.seconds, 0),
    statusCodes,
    errors: runs.reduce((sum, r) => sum + r.errors, 0),
    timeouts: runs.reduce((sum, r) => sum + r.timeouts, 0),
    latencyP50: weighted((r) => r.latencyP50),
    latencyP99: Math.max(...runs.map((r) => r.latencyP99)),
    runSeconds: seconds,
    cpu: weighted((r) => r.cpu),
    cores: undefined,
    serverCpu: weighted((r) => r.serverCpu),
    serverCoreBusy: weighted((r) => r.serverCoreBusy),
    noise: Math.max(...runs.map((r) => r.noise)),
    attempts: Math.max(...runs.map((r) => r.attempts))
  }
}
