// The parent side of the multi-process tests (shared-quota.test.ts, cluster.test.ts): each test
// file spawns itself as N children, each a Fastify app on the same quota, and hammers them. No
// tests here.
import { spawn, type ChildProcess } from 'node:child_process'
import { Agent } from 'node:http'
import type { AdmissionStats } from '../../../lib/index.js'
import { timedGet, type Timed } from './helpers.js'

/** The IPC messages between a test and its children. */
export type ToParent = { type: 'listening', port: number } | { type: 'stats', stats: AdmissionStats }
export type ToChild = { type: 'stats' } | { type: 'close' }

export interface Child {
  readonly process: ChildProcess
  readonly port: number
  /** Resolves with the exit code (or signal) once the child has exited. */
  readonly exited: Promise<number | string>
  /** What the child wrote to stdout and stderr. */
  output (): string
}

/** Every child spawned, started or not: `killSpawned()` ends those still running. */
const spawned = new Set<ChildProcess>()

export function killSpawned (): void {
  for (const p of spawned) if (p.exitCode === null && p.signalCode === null) process.kill(p.pid as number, 'SIGKILL')
}

/**
 * Spawns `file` (a test file, with the parent's `process.execArgv`, so tap's TypeScript loader
 * applies) with `env`, and waits until it says it listens. 90 s: a wait, not a measure — a busy
 * machine starts four processes loading TypeScript slowly.
 */
export function startChild (file: string, env: Record<string, string>): Promise<Child> {
  const child = spawn(process.execPath, [...process.execArgv, file], {
    // No coverage from the children: their transpile maps the kernels' methods to slightly other
    // ranges, which tap's merge then reports as extra, never-called functions.
    env: { ...process.env, ...env, _TAPJS_PROCESSINFO_COVERAGE_: '0' },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc']
  })
  spawned.add(child)
  let output = ''
  child.stdout?.on('data', (chunk: Buffer) => { output += chunk.toString() })
  child.stderr?.on('data', (chunk: Buffer) => { output += chunk.toString() })
  const exited = new Promise<number | string>((resolve) => {
    child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown'))
  })
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`child ${child.pid} did not listen within 90 s: ${output}`)), 90_000)
    child.once('error', reject)
    child.on('message', (message: ToParent) => {
      if (message.type !== 'listening') return
      clearTimeout(timer)
      resolve({ process: child, port: message.port, exited, output: () => output })
    })
    void exited.then((code) => {
      clearTimeout(timer)
      reject(new Error(`child ${child.pid} exited (${code}) before listening: ${output}`))
    })
  })
}

export function statsOf (child: Child): Promise<AdmissionStats> {
  return new Promise((resolve) => {
    const listener = (message: ToParent): void => {
      if (message.type !== 'stats') return
      child.process.off('message', listener)
      resolve(message.stats)
    }
    child.process.on('message', listener)
    child.process.send({ type: 'stats' } satisfies ToChild)
  })
}

/** `total` GETs of `path`, request i to server i mod n, `concurrency` at a time, keep-alive. */
export async function hammer (ports: number[], path: string, total: number, concurrency: number): Promise<Array<Timed & { server: number }>> {
  const agents = ports.map(() => new Agent({ keepAlive: true, maxSockets: concurrency }))
  const results: Array<Timed & { server: number }> = []
  let next = 0
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < total) {
      const i = next++
      const server = i % ports.length
      results[i] = { server, ...await timedGet(ports[server] as number, path, {}, agents[server]) }
    }
  }))
  for (const agent of agents) agent.destroy()
  return results
}

/**
 * A window length (≥ 1 h, whole seconds) whose current window, aligned to multiples of it as the
 * window algorithms align them, has at least `marginMs` left at the server's time `now`: the test
 * then runs inside one window, whatever the time of day.
 */
export function windowAround (now: number, marginMs: number): number {
  let windowMs = 3_600_000
  while (now % windowMs > windowMs - marginMs) windowMs += 1000
  return windowMs
}
