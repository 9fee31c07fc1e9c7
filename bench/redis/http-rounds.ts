// Throughput on Redis: whole HTTP servers (bench/server.ts: Fastify + this plugin, or + @fastify/
// rate-limit 11, each on its Redis store) under the autocannon load child (bench/load.ts), in
// interleaved rounds. Each round starts fresh server processes (a process can stay a few percent
// faster or slower for its whole life) and runs each group's variants A B C C B A, so a drift of the
// machine's speed weighs on every variant alike; the groups' order alternates by round. Around
// every run Redis's counters are read, for its whole-server CPU per HTTP request.
import type { Redis } from 'ioredis'
import { type CoreTime } from '../cpu-noise.js'
import { check, type Load, runLoad, type Server, serverCpuSeconds, startServer } from '../http.js'
import type { LoadResult } from '../load.js'
import { countersBetween, readCounters, scriptCounters } from './redis-info.js'

export interface HttpSpec {
  rounds: number
  seconds: number
  warmupSeconds: number
  connections: number
  keys: number
  /** The core the servers are pinned to. */
  appCore: number
  /** Variants compared with each other, this plugin's first: each group runs A B C C B A. */
  groups: string[][]
}

export interface HttpRun {
  name: string
  rps: number
  total: number
  runSeconds: number
  latencyP99: number
  /** CPU seconds over the run: the server process, the load child, and Redis. */
  serverCpu: number
  loadCpu: number
  redisCpu: number
  /** Script calls Redis ran (EVALSHA + EVAL). */
  scriptCalls: number
  /** Busy seconds of both cores minus the three above: other processes (and interrupts). */
  others: number
}

export type HttpRound = Record<string, HttpRun>

async function runOnce (server: Server, load: Load, admin: Redis, spec: HttpSpec, seconds: number): Promise<HttpRun> {
  const cpu0 = await serverCpuSeconds(server)
  const before = await readCounters(admin)
  const result: LoadResult = await runLoad(load, { port: server.port, seconds, connections: spec.connections, pipelining: 1, keys: spec.keys })
  const window = countersBetween(before, await readCounters(admin))
  const serverCpu = (await serverCpuSeconds(server)) - cpu0
  check(server.name, result)
  const busy = (result.cores ?? []).reduce((sum: number, c: CoreTime) => sum + c.busy, 0)
  const loadCpu = result.cpu * result.runSeconds
  return {
    name: server.name,
    rps: result.rps,
    total: result.total,
    runSeconds: result.runSeconds,
    latencyP99: result.latencyP99,
    serverCpu,
    loadCpu,
    redisCpu: window.cpuSeconds,
    scriptCalls: scriptCounters(window).calls,
    others: result.cores === undefined ? Number.NaN : Math.max(0, busy - serverCpu - loadCpu - window.cpuSeconds)
  }
}

/** Two runs of one variant as one: counts and times added. */
function merged (a: HttpRun, b: HttpRun): HttpRun {
  const total = a.total + b.total
  const runSeconds = a.runSeconds + b.runSeconds
  return {
    name: a.name,
    rps: total / runSeconds,
    total,
    runSeconds,
    latencyP99: Math.max(a.latencyP99, b.latencyP99),
    serverCpu: a.serverCpu + b.serverCpu,
    loadCpu: a.loadCpu + b.loadCpu,
    redisCpu: a.redisCpu + b.redisCpu,
    scriptCalls: a.scriptCalls + b.scriptCalls,
    others: a.others + b.others
  }
}

export async function httpRounds (spec: HttpSpec, load: Load, admin: Redis, log: (line: string) => void): Promise<HttpRound[]> {
  const rounds: HttpRound[] = []
  for (let round = 1; round <= spec.rounds; round++) {
    const names = spec.groups.flat()
    const servers = await Promise.all(names.map((name) => startServer(name, spec.keys, spec.appCore)))
    try {
      if (spec.warmupSeconds > 0) for (const server of servers) await runOnce(server, load, admin, spec, spec.warmupSeconds)
      const byName = new Map(servers.map((s) => [s.name, s]))
      const runs: HttpRound = {}
      for (const group of round % 2 === 1 ? spec.groups : [...spec.groups].reverse()) {
        const order = round % 2 === 1 ? group : [...group].reverse()
        const first: HttpRun[] = []
        for (const name of order) first.push(await runOnce(byName.get(name)!, load, admin, spec, spec.seconds))
        for (const name of [...order].reverse()) {
          const run = merged(first.find((r) => r.name === name)!, await runOnce(byName.get(name)!, load, admin, spec, spec.seconds))
          runs[name] = run
          log(`http round ${round}/${spec.rounds} ${name}: ${Math.round(run.rps)} req/s, Redis ${(run.redisCpu * 1e6 / run.total).toFixed(2)} µs CPU/request, others ${(run.others / run.runSeconds * 100).toFixed(0)} % of a core`)
        }
      }
      rounds.push(runs)
    } finally {
      for (const server of servers) server.child.kill('SIGKILL')
    }
  }
  return rounds
}
