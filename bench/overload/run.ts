// `npm run bench:overload`: the open-loop overload benchmark (issue 11, §1). Builds the package, then:
//  1. capacity C of each work model: a closed-loop probe on the unprotected server;
//  2. the maxInFlight sweep for `admission-good` (unless OVERLOAD_GOOD is set);
//  3. the matrix: every variant at every offered load (multiples of C), OVERLOAD_REPEATS times,
//     variants in rotating order from one cell to the next;
//  4. the step: 0.8 C on the downstream model, which slows 4× for 10 s, then recovers.
// Prints markdown tables on stdout (progress on stderr), writes bench/results-overload-<OUT>.json and
// the chart bench/overload/chart.svg. Settings: config.ts (OVERLOAD_* env).
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { cpus } from 'node:os'
import { fileURLToPath } from 'node:url'
import { killAll } from '../child.js'
import { type CellRun, runCell } from './cell.js'
import { chart, type ChartInput } from './chart.js'
import { type OverloadConfig, readConfig } from './config.js'
import type { CellSpec } from './load.js'
import { type CellRecord, matrixTable, type PriorityRecord, priorityTable, type StepRecord, stepTable } from './report.js'
import type { ServerSettings } from './server.js'
import { spread } from './stats.js'
import { SWEPT_VARIANT, VARIANTS } from './variants.js'
import type { ModelName } from './work.js'

const root = fileURLToPath(new URL('../../', import.meta.url))
const log = (line: string): void => { process.stderr.write(line + '\n') }
const print = (line = ''): void => { process.stdout.write(line + '\n') }

function git (args: string[]): string {
  try { return execFileSync('git', args, { cwd: root, encoding: 'utf8' }).trim() } catch { return 'unknown' }
}

function settingsFor (config: OverloadConfig, model: ModelName, goodMaxInFlight: number): ServerSettings {
  return { model, cpuMs: config.cpuMs, poolSize: config.poolSize, opMs: config.opMs, goodMaxInFlight }
}

function openSpec (config: OverloadConfig, rate: number): CellSpec {
  return { mode: 'open', rate, warmupMs: config.warmupMs, measureMs: config.measureMs, deadlineMs: config.deadlineMs, sockets: config.sockets, binMs: 1000 }
}

function record (run: CellRun, meta: { repeat: number, model: ModelName, variant: string, load: number, rate: number, capacity: number }): CellRecord {
  const r = run.result
  const share = (x: number): number => (r.requests === 0 ? Number.NaN : x / r.requests)
  return {
    ...meta,
    achievedRate: r.achievedRate,
    goodput: r.goodput / meta.capacity,
    okP50: r.okP50,
    okP99: r.okP99,
    shedShare: share(r.shed),
    shedP99: r.shedP99,
    timeoutShare: share(r.timeouts),
    timeoutQueuedShare: share(r.timeoutsQueued),
    errorShare: share(r.errors + r.otherStatus),
    lagP99: r.lagP99,
    queuedShare: r.queuedShare,
    queueWaitP99: r.queueWaitP99,
    connections: r.connections,
    wastedShare: run.server.handled === 0 ? 0 : run.server.wasted / run.server.handled,
    maxQueued: run.server.maxQueued,
    serverCpu: run.serverCpu,
    noise: run.noise
  }
}

/** Capacity C: closed loop on the unprotected server, `concurrency` loops (enough to keep the work busy:
 * 8 for cpu, 4 × the pool for downstream), 200s per second over the window; median of the repeats. */
async function capacity (config: OverloadConfig, model: ModelName): Promise<{ capacity: number, probes: number[] }> {
  const concurrency = model === 'cpu' ? 8 : config.poolSize * 4
  const probes: number[] = []
  for (let i = 0; i < config.repeats; i++) {
    const run = await runCell('none', settingsFor(config, model, 1), { mode: 'closed', concurrency, warmupMs: 1000, measureMs: config.capacityMs, deadlineMs: config.deadlineMs, sockets: config.sockets, binMs: 1000 })
    probes.push(run.result.goodput)
    log(`capacity ${model} probe ${i + 1}: ${run.result.goodput.toFixed(0)} req/s (closed loop, ${concurrency} connections, other processes ${run.noise.toFixed(2)} cores)`)
  }
  return { capacity: spread(probes).median, probes }
}

async function main (): Promise<void> {
  const config = readConfig()
  const started = new Date()
  log(`config: ${JSON.stringify(config)}`)
  const variants = config.variants
  const records: CellRecord[] = []
  const sweepRecords: Array<CellRecord & { maxInFlight: number }> = []
  const steps: StepRecord[] = []
  const capacities: Partial<Record<ModelName, number>> = {}
  const probes: Partial<Record<ModelName, number[]>> = {}
  const good: Partial<Record<ModelName, number>> = {}
  const goodFrom: Partial<Record<ModelName, string>> = {}
  const needStep = config.step && variants.length > 0
  const needPriorities = config.priorities && config.priorityVariants.length > 0
  const priorityRecords: PriorityRecord[] = []
  const models = [...config.models]
  if ((needStep || needPriorities) && !models.includes('downstream')) models.push('downstream')

  for (const model of models) {
    const c = await capacity(config, model)
    capacities[model] = c.capacity
    probes[model] = c.probes
  }

  // The sweep: `admission-good` at sweepLoad × C with each candidate, once; the most goodput wins
  // (within 2 % of the best, the lowest p99 of the 200s).
  for (const model of models) {
    const C = capacities[model]!
    if (config.good[model] !== undefined) { good[model] = config.good[model]; goodFrom[model] = 'OVERLOAD_GOOD'; continue }
    if (!variants.includes(SWEPT_VARIANT)) continue
    const candidates = config.sweep[model]
    for (const m of candidates) {
      const rate = config.sweepLoad * C
      const run = await runCell(SWEPT_VARIANT, settingsFor(config, model, m), openSpec(config, rate))
      const rec = { ...record(run, { repeat: 0, model, variant: `maxInFlight ${m}`, load: config.sweepLoad, rate, capacity: C }), maxInFlight: m }
      sweepRecords.push(rec)
      log(`sweep ${model} maxInFlight ${m}: goodput ${rec.goodput.toFixed(2)} C, p99 ${rec.okP99.toFixed(1)} ms`)
    }
    const rs = sweepRecords.filter((r) => r.model === model)
    const best = Math.max(0, ...rs.map((r) => (Number.isNaN(r.goodput) ? 0 : r.goodput)))
    const p99 = (r: CellRecord): number => (Number.isNaN(r.okP99) ? Infinity : r.okP99)
    const pick = rs.filter((r) => r.goodput >= best * 0.98).sort((a, b) => p99(a) - p99(b))[0]
    if (best < 0.05 || pick === undefined) {
      good[model] = config.sweepFallback[model]
      goodFrom[model] = `sweep at ${config.sweepLoad} C inconclusive (best goodput ${best.toFixed(2)} C): fallback OVERLOAD_SWEEP_FALLBACK`
    } else {
      good[model] = pick.maxInFlight
      goodFrom[model] = `sweep at ${config.sweepLoad} C: goodput ${pick.goodput.toFixed(2)} C, p99 ${pick.okP99.toFixed(0)} ms`
    }
    log(`sweep ${model}: maxInFlight ${good[model]} (${goodFrom[model]})`)
  }
  const goodFor = (model: ModelName): number => good[model] ?? config.sweepFallback[model]

  // The matrix, interleaved: each (model, load) cell runs every variant, the order rotated by one each time.
  let rotation = 0
  const total = config.repeats * config.models.length * config.loads.length * variants.length
  let done = 0
  for (let repeat = 1; repeat <= config.repeats; repeat++) {
    for (const model of config.models) {
      const C = capacities[model]!
      for (const load of config.loads) {
        const order = variants.map((_, i) => variants[(i + rotation) % variants.length]!)
        rotation++
        for (const variant of order) {
          const rate = load * C
          const run = await runCell(variant, settingsFor(config, model, goodFor(model)), openSpec(config, rate))
          const rec = record(run, { repeat, model, variant, load, rate, capacity: C })
          records.push(rec)
          done++
          log(`[${done}/${total}] r${repeat} ${model} ${load} C ${variant}: sent ${rec.achievedRate.toFixed(0)}/s, goodput ${rec.goodput.toFixed(2)} C, p99 ${rec.okP99.toFixed(1)} ms, 503 ${(rec.shedShare * 100).toFixed(0)} %, timeouts ${(rec.timeoutShare * 100).toFixed(0)} %, lag p99 ${rec.lagP99.toFixed(1)} ms, others ${rec.noise.toFixed(2)} cores`)
        }
      }
    }
  }

  // The step: 0.8 C on the downstream model; the downstream slows `stepFactor`× for stepSlowMs, then recovers.
  if (needStep) {
    const C = capacities.downstream!
    const rate = config.stepLoad * C
    const measureMs = config.stepBeforeMs + config.stepSlowMs + config.stepAfterMs
    const order = variants.map((_, i) => variants[(i + rotation) % variants.length]!)
    for (const variant of order) {
      const run = await runCell(variant, settingsFor(config, 'downstream', goodFor('downstream')), { ...openSpec(config, rate), measureMs }, {
        onStarted: (server) => {
          setTimeout(() => { server.send({ slow: config.stepFactor }) }, config.stepBeforeMs).unref()
          setTimeout(() => { server.send({ slow: 1 }) }, config.stepBeforeMs + config.stepSlowMs).unref()
        }
      })
      steps.push({ variant, capacity: C, rate, phases: { beforeS: config.stepBeforeMs / 1000, slowS: config.stepSlowMs / 1000, afterS: config.stepAfterMs / 1000, factor: config.stepFactor }, bins: run.result.bins, noise: run.noise })
      log(`step ${variant}: ${run.result.bins.map((b) => (b.goodput / C).toFixed(2)).join(' ')}`)
    }
    steps.sort((a, b) => variants.indexOf(a.variant) - variants.indexOf(b.variant))
  }

  // Priorities: sheddable traffic at prioritySheddable × C to `/sheddable` and critical traffic at
  // priorityCritical × C to `/critical`, in one open loop on the downstream model.
  if (needPriorities) {
    const C = capacities.downstream!
    for (let repeat = 1; repeat <= config.repeats; repeat++) {
      for (const variant of config.priorityVariants) {
        const spec = { ...openSpec(config, config.prioritySheddable * C), mix: { path: '/critical', mainPath: '/sheddable', rate: config.priorityCritical * C } }
        const run = await runCell(variant, settingsFor(config, 'downstream', goodFor('downstream')), spec)
        const streams = run.result.streams!
        const rec = { variant, repeat, capacity: C, sheddable: streams.main, critical: streams.mixed, noise: run.noise }
        priorityRecords.push(rec)
        log(`priorities r${repeat} ${variant}: critical ${(rec.critical.goodput / Math.max(1, rec.critical.offered) * 100).toFixed(1)} % of offered (p99 ${Number(rec.critical.okP99).toFixed(1)} ms), sheddable goodput ${(rec.sheddable.goodput / C).toFixed(2)} C, others ${run.noise.toFixed(2)} cores`)
      }
    }
  }

  const finished = new Date()
  const runSeconds = (finished.getTime() - started.getTime()) / 1000
  const commit = git(['rev-parse', '--short', 'HEAD'])
  const dirty = git(['status', '--porcelain', '--', 'lib', 'bench/overload']) !== ''
  const noises = [...records.map((r) => r.noise), ...steps.map((s) => s.noise)]
  const noise = spread(noises)
  const note = `${started.toISOString().slice(0, 16)}Z, commit ${commit}${dirty ? '+dirty' : ''}, repeats ${config.repeats}, ${config.measureMs / 1000} s cells, cpu ${config.cpuMs} ms, pool ${config.poolSize} × ${config.opMs} ms; other processes took ${noise.min.toFixed(1)}–${noise.max.toFixed(1)} cores (median ${noise.median.toFixed(1)}) during the cells`
  const labels = { [SWEPT_VARIANT]: `${SWEPT_VARIANT} (${config.models.map((m) => `${m} ${goodFor(m)}`).join(', ')})` }
  const chartInput: ChartInput = { records, models: config.models, variants, loads: config.loads, capacity: capacities, deadlineMs: config.deadlineMs, note, labels }

  print('# Overload benchmark (open loop)')
  print()
  print(`${note}. Node ${process.version}, ${cpus().length} cores (${cpus()[0]?.model ?? '?'}); server on core 0, generator on core 1.`)
  print(`Deadline ${config.deadlineMs} ms, ${config.sockets} client connections, warm-up ${config.warmupMs} ms, measured ${config.measureMs} ms per cell; run took ${runSeconds.toFixed(0)} s.`)
  print()
  print('## Capacity C (closed loop, unprotected server)')
  print()
  print('| model | C (req/s) | probes |')
  print('| --- | --- | --- |')
  for (const model of models) print(`| ${model} | ${capacities[model]!.toFixed(0)} | ${probes[model]!.map((p) => p.toFixed(0)).join(', ')} |`)
  print()
  print(`## maxInFlight for \`${SWEPT_VARIANT}\``)
  print()
  for (const model of models) if (good[model] !== undefined) print(`- ${model}: ${good[model]} (${goodFrom[model]})`)
  for (const model of models) {
    const rs = sweepRecords.filter((r) => r.model === model)
    if (rs.length === 0) continue
    print()
    print(`${model}, at ${config.sweepLoad} C:`)
    print()
    print(matrixTable(rs, model, rs.map((r) => r.variant), [config.sweepLoad], 1))
  }
  for (const model of config.models) {
    print()
    print(`## ${model} (C = ${capacities[model]!.toFixed(0)} req/s)`)
    print()
    print(matrixTable(records, model, variants, config.loads, config.repeats))
  }
  if (steps.length > 0) {
    print()
    print(`## Step: downstream at ${config.stepLoad} C (${steps[0]!.rate.toFixed(0)} req/s), ${config.stepFactor}× slower from ${config.stepBeforeMs / 1000} s to ${(config.stepBeforeMs + config.stepSlowMs) / 1000} s`)
    print()
    print('Per second of the measured window (requests binned by their scheduled second): goodput / C and p99 of the 200s.')
    print()
    print(stepTable(steps))
  }
  if (priorityRecords.length > 0) {
    print()
    print(`## Priorities: downstream, sheddable at ${config.prioritySheddable} C and critical at ${config.priorityCritical} C`)
    print()
    print(priorityTable(priorityRecords, config.priorityVariants))
  }
  print()
  print('Cells: median of the repeats, (min–max) when they differ. "↳ never sent": timeouts that expired in the client\'s queue before getting a connection; "client queued": requests that waited > 1 ms for a free connection in the client pool; "gen lag": issue time − scheduled time; ⚠: in some repeat the generator did not keep the schedule (sent under 95 % of the rate, or lag p99 over 100 ms): read that row as the generator\'s limit, not the server\'s; "wasted work": handlers that finished after their client had gone; "other CPU": cores taken by processes other than this cell\'s server and generator.')

  const out = `bench/results-overload-${config.out}.json`
  writeFileSync(new URL(out, `file://${root}`), JSON.stringify({
    started: started.toISOString(), finished: finished.toISOString(), runSeconds, commit, dirty, node: process.version, cpu: cpus()[0]?.model,
    config, variants: VARIANTS.filter((v) => variants.includes(v.name)).map((v) => ({ name: v.name, description: v.description })),
    capacity: capacities, probes, good, goodFrom, sweep: sweepRecords, cells: records, steps, priorities: priorityRecords, chart: chartInput
  }, null, 2) + '\n')
  writeFileSync(new URL(config.chart, `file://${root}`), chart(chartInput))
  log(`wrote ${out} and ${config.chart} (${runSeconds.toFixed(0)} s)`)
}

process.on('SIGINT', () => { killAll(); process.exit(130) })
main().then(() => { killAll(); process.exit(0) }, (error: unknown) => { killAll(); log(String((error as Error).stack ?? error)); process.exit(1) })
