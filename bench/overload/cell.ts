// One cell: a fresh pinned server (core 0) and a fresh pinned generator (core 1), one load, then both
// are stopped. Fresh processes per cell: a downstream queue or a backlog of aborted work left by one
// cell never leaks into the next.
import type { ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { nextMessage, startPinned } from '../child.js'
import { coreTimes, timesBetween } from '../cpu-noise.js'
import type { CellSpec, LoadResult } from './load.js'
import type { ServerSettings, ServerStats } from './server.js'

export const SERVER_CORE = 0
export const LOAD_CORE = 1
const serverScript = fileURLToPath(new URL('./server.ts', import.meta.url))
const loadScript = fileURLToPath(new URL('./load.ts', import.meta.url))

export interface CellRun {
  result: LoadResult
  server: ServerStats
  /** CPU seconds per wall second taken by processes other than this cell's server and generator, over both cores. */
  noise: number
  /** Server process CPU per second of the cell (1 = a whole core). */
  serverCpu: number
  wallMs: number
}

export interface CellHooks {
  /** Called when the measured window starts, with the server (to send it controls) and that instant (epoch ms). */
  onStarted?: (server: ChildProcess, epochMs: number) => void
}

/** IPC sends JSON: a NaN (no sample) arrives as null. */
function revive (result: LoadResult): LoadResult {
  const fix = <T extends object>(o: T): T => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, v === null ? Number.NaN : v])) as T
  return { ...fix(result), bins: result.bins.map(fix), ...(result.segments === undefined ? {} : { segments: result.segments.map(fix) }), ...(result.streams === undefined ? {} : { streams: result.streams }), cpu: result.cpu }
}

function stop (child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) { resolve(); return }
    child.once('exit', () => { resolve() })
    child.kill('SIGKILL')
  })
}

export async function runCell (variant: string, settings: ServerSettings, spec: CellSpec, hooks: CellHooks = {}): Promise<CellRun> {
  const before = coreTimes()
  const t0 = performance.now()
  const server = startPinned({ core: SERVER_CORE, script: serverScript, args: [variant, JSON.stringify(settings)], ipc: true })
  let load: ChildProcess | undefined
  try {
    const port = await nextMessage(server, (m) => (m as { port?: number }).port, 60_000)
    load = startPinned({ core: LOAD_CORE, script: loadScript, ipc: true })
    const gen = load
    if (hooks.onStarted !== undefined) {
      const onStarted = hooks.onStarted
      gen.on('message', (m) => { const s = (m as { started?: number }).started; if (s !== undefined) onStarted(server, s) })
    }
    gen.send({ ...spec, port })
    const reply = await nextMessage(gen, (m) => {
      const r = m as { result?: LoadResult, error?: string }
      return r.result !== undefined || r.error !== undefined ? r : undefined
    }, spec.warmupMs + spec.measureMs + spec.deadlineMs + 60_000)
    if (reply.result === undefined) throw new Error(`generator: ${reply.error ?? 'no result'}`)
    const result = revive(reply.result)
    server.send('stats')
    const stats = await nextMessage(server, (m) => (m as { stats?: ServerStats }).stats, 10_000)
    await stop(gen)
    await stop(server)
    const wallMs = performance.now() - t0
    const cores = timesBetween(before, coreTimes())
    const ours = (stats.cpu.user + stats.cpu.system + result.cpu.user + result.cpu.system) / 1e6
    const noise = cores === undefined ? Number.NaN : Math.max(0, cores.reduce((s, c) => s + c.busy, 0) - ours) / (wallMs / 1000)
    return { result, server: stats, noise, serverCpu: (stats.cpu.user + stats.cpu.system) / 1e6 / (wallMs / 1000), wallMs }
  } finally {
    if (load !== undefined) await stop(load)
    await stop(server)
  }
}
