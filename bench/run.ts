// `npm run bench`: micro-benchmarks, then HTTP rounds, each variant beside bare Fastify (A B B A); prints
// markdown tables and writes bench/results-latest.json (BENCH_OUT=name: results-name.json). Settings: see config.ts (BENCH_* env).
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { cpus } from 'node:os'
import { fileURLToPath } from 'node:url'
import { killAll, runPinned } from './child.js'
import { type BenchConfig, readConfig } from './config.js'
import { waitForQuiet } from './cpu-noise.js'
import { measure, merged, type RunResult, type Server, SERVER_CORE, startLoad, startServer } from './http.js'
import type { MemoryResult } from './memory.js'
import type { MicroResult } from './micro.js'
import type { RedisCostResult } from './redis/script-time.js'
import { httpTable, microTable } from './report.js'
import { microChecks, type Round, summarize } from './summary.js'

const here = (file: string): string => fileURLToPath(new URL(file, import.meta.url))
const log = (line: string): void => { process.stderr.write(line + '\n') }

function version (pkg: string): string {
  return (JSON.parse(readFileSync(here(`../node_modules/${pkg}/package.json`), 'utf8')) as { version: string }).version
}

/** A digest of lib/ as it was when the servers started (the lead edits lib/ without committing). */
function libDigest (): string {
  const hash = createHash('sha256')
  for (const file of (readdirSync(here('../lib'), { recursive: true }) as string[]).sort()) {
    if (file.endsWith('.ts')) hash.update(file).update(readFileSync(here(`../lib/${file}`)))
  }
  return hash.digest('hex').slice(0, 16)
}

function git (args: string[]): string {
  try { return execFileSync('git', args, { cwd: here('..'), encoding: 'utf8' }).trim() } catch { return 'unknown' }
}

async function micro (redisVariants: boolean): Promise<{ micro: MicroResult, memory: MemoryResult[], redisCost: RedisCostResult | undefined }> {
  log('micro: core take, memory limiter consume')
  const result = await runPinned<MicroResult>({ core: SERVER_CORE, script: here('./micro.ts') }, 120_000)
  const memory: MemoryResult[] = []
  for (const store of ['admission', 'local-store']) {
    log(`memory: ${store}, 1,000,000 identities`)
    memory.push(await runPinned<MemoryResult>({ core: SERVER_CORE, script: here('./memory.ts'), args: [store, '1000000'], nodeFlags: ['--expose-gc'] }, 120_000))
  }
  let redisCost: RedisCostResult | undefined
  if (redisVariants) {
    log('redis: time per decision, each script, on a private redis-server')
    redisCost = await runPinned<RedisCostResult>({ core: SERVER_CORE, script: here('./redis/script-time.ts') }, 120_000)
  }
  return { micro: result, memory, redisCost }
}

function noiseNote (rounds: Round[], config: BenchConfig): string[] {
  const runs = rounds.flatMap((round) => Object.values(round.runs))
  const noisy = runs.filter((r) => r.noise > config.maxNoise).length
  const idle = runs.filter((r) => r.serverCoreBusy < config.minServerBusy).length
  const notes: string[] = []
  if (noisy > 0) notes.push(`${noisy} of ${runs.length} runs stayed noisy (other processes took more than ${Math.round(config.maxNoise * 100)} % of a core, after retries).`)
  if (idle > 0) notes.push(`${idle} of ${runs.length} runs left the server core idle more than ${Math.round((1 - config.minServerBusy) * 100)} % of the time (load-bound).`)
  return notes.length === 0 ? [] : ['', `**${notes.join(' ')}** Medians over rounds damp such runs; the rounds are in the JSON.`]
}

async function main (): Promise<void> {
  const config = readConfig()
  const started = new Date()
  log(`config: ${JSON.stringify(config)}`)
  const micros = config.micro ? (await waitForQuiet(0.1, config.quietWaitMs), await micro(config.variants.some((name) => name.includes('redis')))) : undefined

  const lib = libDigest()
  const load = startLoad()
  const rounds: Round[] = []
  for (let round = 1; round <= config.rounds; round++) {
    // Fresh server processes every round: one process can stay faster or slower than another
    // running the same code by several percent for its whole life (JIT, heap layout); new
    // processes each round turn that into noise the median damps, instead of a bias.
    const servers: Server[] = []
    for (const name of config.variants) servers.push(await startServer(name, config.keys))
    if (config.warmupSeconds > 0) for (const server of servers) await measure(server, load, { ...config, retries: 0 }, config.warmupSeconds)
    const bare = servers.find((server) => server.name === 'bare')!
    const others = servers.filter((server) => server !== bare)
    const runs: Record<string, RunResult> = {}
    const bareBeside: Record<string, RunResult> = {}
    const bareRuns: RunResult[] = []
    // Each variant is measured beside bare Fastify, A B B A: a drift of the machine's speed during
    // the four runs weighs on both sides alike. The order of the variants alternates by round.
    for (const server of round % 2 === 1 ? others : [...others].reverse()) {
      const before = await measure(bare, load, config, config.seconds)
      const first = await measure(server, load, config, config.seconds)
      const second = await measure(server, load, config, config.seconds)
      const after = await measure(bare, load, config, config.seconds)
      runs[server.name] = merged([first, second])
      bareBeside[server.name] = merged([before, after])
      bareRuns.push(before, after)
      const run = runs[server.name]!
      log(`round ${round}/${config.rounds} ${server.name}: ${Math.round(run.rps)} req/s beside bare ${Math.round(bareBeside[server.name]!.rps)} (× ${(run.rps / bareBeside[server.name]!.rps).toFixed(3)}), server core busy ${Math.round(run.serverCoreBusy * 100)} %, load CPU ${Math.round(run.cpu * 100)} %, noise ${Math.round(run.noise * 100)} %`)
    }
    runs.bare = merged(bareRuns)
    bareBeside.bare = runs.bare
    rounds.push({ runs, bareBeside })
    for (const server of servers) server.child.kill('SIGKILL')
  }
  killAll()

  const summary = summarize(config.variants, rounds)
  const checks = micros === undefined ? [] : microChecks(micros.micro, micros.memory, micros.redisCost)
  const out = [
    `## HTTP: median of ${config.rounds} rounds; each variant beside bare Fastify (A B B A), ${config.seconds} s a run; ${config.connections} connections, pipelining ${config.pipelining}, ${config.keys} client keys`,
    '',
    httpTable(summary),
    ...noiseNote(rounds, config),
    ...(checks.length > 0 ? ['', '## Micro-benchmarks', '', microTable(checks)] : [])
  ].join('\n')
  process.stdout.write(out + '\n')

  const results = {
    started: started.toISOString(),
    finished: new Date().toISOString(),
    machine: { cpu: cpus()[0]?.model ?? 'unknown', cores: cpus().length, node: process.version },
    versions: { fastify: version('fastify'), '@fastify/rate-limit': version('@fastify/rate-limit'), autocannon: version('autocannon') },
    git: { commit: git(['rev-parse', 'HEAD']), libDirty: git(['status', '--porcelain', '--', 'lib']) !== '', libDigest: lib, libChangedDuringRun: libDigest() !== lib },
    config,
    summary,
    rounds,
    micro: micros?.micro,
    memory: micros?.memory,
    redisCost: micros?.redisCost,
    checks,
    markdown: out
  }
  const file = here(`./results-${config.out}.json`)
  writeFileSync(file, JSON.stringify(results, null, 2) + '\n')
  log(`wrote ${file}`)
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => { killAll(); process.exit(130) })
}
process.once('exit', killAll)
try {
  await main()
} catch (error) {
  killAll()
  log(`bench failed: ${(error as Error).stack ?? String(error)}`)
  process.exitCode = 1
}
