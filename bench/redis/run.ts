// `npm run bench:redis`: the cost of a decision on Redis, this plugin against @fastify/rate-limit 11's
// Redis store, on a private redis-server pinned to core 0. First Redis's CPU per decision without
// HTTP (decisions.ts), then whole HTTP servers in interleaved rounds (http-rounds.ts); prints
// markdown tables and the targets, writes bench/redis/results-<BENCH_OUT|latest>.json.
// Method and caveats: bench/redis/README.md. Settings: config.ts.
import { readFileSync, writeFileSync } from 'node:fs'
import { cpus } from 'node:os'
import { fileURLToPath } from 'node:url'
import { killAll, runPinned } from '../child.js'
import { startLoad } from '../http.js'
import { median } from '../stats.js'
import { readRedisConfig } from './config.js'
import type { DecisionResult, DecisionSpec } from './decisions.js'
import { httpRounds, type HttpRound } from './http-rounds.js'
import { startPinnedRedis } from './private-redis.js'
import { decisionRatios, decisionTable, decisionValues, httpRatios, httpTable, redisCpuPerDecision, scriptCallsPerDecision, type Target, targetTable } from './report.js'

const here = (file: string): string => fileURLToPath(new URL(file, import.meta.url))
const log = (line: string): void => { process.stderr.write(line + '\n') }
const version = (pkg: string): string => (JSON.parse(readFileSync(here(`../../node_modules/${pkg}/package.json`), 'utf8')) as { version: string }).version

/** The HTTP groups: this plugin first, @fastify/rate-limit last; each without and with auto-pipelining. */
const GROUPS = [['redis-admit', 'redis-admit-fw', 'rl-redis-admit'], ['redis-refuse', 'redis-refuse-nocache', 'rl-redis-refuse'], ['redis-hot', 'rl-redis-hot']]
  // BENCH_GROUPS=admit, refuse or hot: only that group' HTTP runs.
  .filter((group) => process.env.BENCH_GROUPS === undefined || group[0] === `redis-${process.env.BENCH_GROUPS}`)
  .flatMap((group) => [group, group.map((name) => `${name}-ap`)])
const VERSUS: Record<string, string> = {}
for (const group of GROUPS) for (const name of group.slice(0, -1)) VERSUS[name] = group.at(-1)!

async function main (): Promise<void> {
  const config = readRedisConfig()
  const started = new Date()
  log(`config: ${JSON.stringify(config)}`)
  const redis = await startPinnedRedis(config.redisCore)
  redisPid = redis.pid
  try {
    let decisions: DecisionResult | undefined
    if (config.decisions > 0) {
      const spec: DecisionSpec = { url: redis.url, rounds: config.decisionRounds, decisions: config.decisions, warmup: Math.ceil(config.decisions / 10), concurrency: config.concurrency, keySpace: config.keySpace }
      decisions = await runPinned<DecisionResult>({ core: config.appCore, script: here('./decisions.ts'), args: [JSON.stringify(spec)] }, 240_000)
    }
    let rounds: HttpRound[] = []
    if (config.http && config.httpRounds > 0) {
      // The servers (bench/server.ts) read REDIS_URL: the private server.
      process.env.REDIS_URL = redis.url
      const load = startLoad(config.loadCore)
      rounds = await httpRounds({ rounds: config.httpRounds, seconds: config.seconds, warmupSeconds: config.warmupSeconds, connections: config.connections, keys: config.keys, appCore: config.appCore, groups: GROUPS }, load, redis.admin, log)
      load.child.kill('SIGKILL')
    }
    const targets: Target[] = []
    if (decisions !== undefined) {
      for (const ap of ['', ' +AP']) {
        targets.push({ label: `Redis CPU per decision, admitting${ap}: admission / rate-limit`, ratios: decisionRatios(decisions, `admission admit${ap}`, `rate-limit admit${ap}`, redisCpuPerDecision), max: 1.15 })
        targets.push({ label: `Redis CPU per decision, admitting, fixed-window${ap}: admission / rate-limit`, ratios: decisionRatios(decisions, `admission admit fixed-window${ap}`, `rate-limit admit${ap}`, redisCpuPerDecision), max: 1.15 })
        targets.push({ label: `Redis CPU per decision, refusing, no deny cache${ap}: admission / rate-limit`, ratios: decisionRatios(decisions, `admission refuse no-cache${ap}`, `rate-limit refuse${ap}`, redisCpuPerDecision), max: 1.3 })
        targets.push({ label: `Redis CPU per decision, one hot key, leases${ap}: admission / rate-limit`, ratios: decisionRatios(decisions, `admission hot leases${ap}`, `rate-limit hot${ap}`, redisCpuPerDecision), max: 0.2 })
        targets.push({ label: `Script calls per decision, one hot key, leases${ap}`, ratios: decisionValues(decisions, `admission hot leases${ap}`, scriptCallsPerDecision), max: 0.1 })
      }
    }
    if (rounds.length > 0) {
      for (const ap of ['', '-ap'].filter((ap) => rounds[0]![`redis-admit${ap}`] !== undefined && rounds[0]![`redis-refuse${ap}`] !== undefined)) {
        targets.push({ label: `HTTP req/s on Redis, admitting${ap}: redis-admit${ap} / rl-redis-admit${ap}`, ratios: httpRatios(rounds, `redis-admit${ap}`, `rl-redis-admit${ap}`), min: 1.0 })
        targets.push({ label: `HTTP req/s on Redis, admitting, fixed-window${ap}: redis-admit-fw${ap} / rl-redis-admit${ap}`, ratios: httpRatios(rounds, `redis-admit-fw${ap}`, `rl-redis-admit${ap}`), min: 1.0 })
        targets.push({ label: `HTTP req/s on Redis, refusing, deny cache${ap}: redis-refuse${ap} / rl-redis-refuse${ap}`, ratios: httpRatios(rounds, `redis-refuse${ap}`, `rl-redis-refuse${ap}`), min: 1.5 })
        if (rounds[0]![`redis-hot${ap}`] !== undefined) targets.push({ label: `HTTP req/s on Redis, one hot key, leases${ap}: redis-hot${ap} / rl-redis-hot${ap}`, ratios: httpRatios(rounds, `redis-hot${ap}`, `rl-redis-hot${ap}`), min: 1.0 })
      }
    }
    const out = [
      ...(decisions === undefined
        ? []
        : [`## Redis per decision: ${config.decisionRounds} rounds × ${config.decisions} decisions a cell, ${config.concurrency} in flight, admitting over ${config.keySpace.toLocaleString('en-US')} random keys; medians (range of rounds); Redis idle ${(decisions.idleCpuPerSecond * 1e6).toFixed(0)} µs CPU/s`, '', decisionTable(decisions), '']),
      ...(rounds.length === 0
        ? []
        : [`## HTTP on Redis: ${config.httpRounds} rounds, each variant twice a round (A B C C B A), ${config.seconds} s a run; ${config.connections} connections, ${config.keys} client keys; layout ${config.layout}`, '', httpTable(rounds, VERSUS), '']),
      '## Targets (issue 10 item 6; issue 22 item 5)', '', targetTable(targets)
    ].join('\n')
    process.stdout.write(out + '\n')
    const file = here(`./results-${config.out}.json`)
    const results = {
      started: started.toISOString(),
      finished: new Date().toISOString(),
      machine: { cpu: cpus()[0]?.model ?? 'unknown', cores: cpus().length, node: process.version },
      versions: { redis: (await redis.admin.info('server')).match(/redis_version:(\S+)/)?.[1] ?? 'unknown', ioredis: version('ioredis'), fastify: version('fastify'), '@fastify/rate-limit': version('@fastify/rate-limit'), autocannon: version('autocannon') },
      config,
      targets: targets.map((t) => ({ ...t, median: median(t.ratios) })),
      decisions,
      http: rounds,
      markdown: out
    }
    writeFileSync(file, JSON.stringify(results, null, 2) + '\n')
    log(`wrote ${file}`)
  } finally {
    killAll()
    await redis.stop()
  }
}

/** The private redis-server, killed by its pid if the bench is interrupted. */
let redisPid: number | undefined
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    killAll()
    if (redisPid !== undefined) process.kill(redisPid, 'SIGKILL')
    process.exit(130)
  })
}
try {
  await main()
} catch (error) {
  log(`bench failed: ${(error as Error).stack ?? String(error)}`)
  process.exitCode = 1
}
