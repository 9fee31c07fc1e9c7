// `npm run bench:overload`: the open-loop overload benchmark (issue 11, §1). Builds the package, then:
//  1. capacity C of each work model: a closed-loop probe on the unprotected server;
//  2. the maxInFlight sweep for `admission-good` (unless OVERLOAD_GOOD is set);
//  3. the matrix: every variant at every offered load (multiples of C), OVERLOAD_REPEATS times,
//     variants in rotating order from one cell to the next;
//     each also on a fresh connection per request ("+reconnect", OVERLOAD_RECONNECT);
//  4. the step: 0.8 C on the downstream model, which slows 4× for 10 s, then recovers;
//  5. the spike: 0.7 C, then 1.4 C for 3 s, then 0.7 C again, in 10 ms bins;
//  6. the priorities: sheddable at 12 C and critical at 0.2 C (downstream model).
// The generator's connection cap is max(2 × C × deadline, 64) per model unless OVERLOAD_SOCKETS is set.
// Prints markdown tables on stdout (progress on stderr), writes bench/results-overload-<OUT>.json and,
// when OVERLOAD_CHART is set, the chart. Settings: config.ts (OVERLOAD_* env).
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { cpus } from 'node:os'
import { fileURLToPath } from 'node:url'
import { killAll } from '../child.js'
import { type CellRun, runCell } from './cell.js'
import { chart, type ChartInput } from './chart.js'
import { type OverloadConfig, readConfig, socketsFor } from './config.js'
import type { CellSpec, ClientName, OpenSpec } from './load.js'
import { recoveryTables, runRecovery, type RecoveryRecord } from './recovery.js'
import { type CellRecord, matrixTable, type PriorityRecord, priorityTable, type SpikeRecord, spikeTable, type StepRecord, stepTable } from './report.js'
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

function openSpec (config: OverloadConfig, rate: number, capacity: number, reconnect = false, client: ClientName = 'raw'): Omit<OpenSpec, 'port'> {
  return { mode: 'open', rate, warmupMs: config.warmupMs, measureMs: config.measureMs, deadlineMs: config.deadlineMs, sockets: socketsFor(config, capacity, client), maxConnecting: config.maxConnecting, reconnect, binMs: 1000, client }
}

const RECONNECT = ' +reconnect'
/** The rows driven by undici read "<variant> [undici]" (keep-alive only: a fresh connection per request is the raw client's storm). */
const UNDICI = ' [undici]'

/** A matrix row's variant, client and connections, from its label. */
function rowOf (label: string): { variant: string, client: ClientName, reconnect: boolean } {
  if (label.endsWith(UNDICI)) return { variant: label.slice(0, -UNDICI.length), client: 'undici', reconnect: false }
  if (label.endsWith(RECONNECT)) return { variant: label.slice(0, -RECONNECT.length), client: 'raw', reconnect: true }
  return { variant: label, client: 'raw', reconnect: false }
}

function record (run: CellRun, meta: { repeat: number, model: ModelName, variant: string, load: number, rate: number, capacity: number }, config: OverloadConfig): CellRecord {
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
    sockets: r.sockets,
    cDeadline: meta.capacity * config.deadlineMs / 1000,
    deadlineMs: config.deadlineMs,
    maxOpen: r.maxOpen,
    connectErrors: r.connectErrors,
    lagP50: r.lagP50,
    lagMax: r.lagMax,
    reconnect: meta.variant.endsWith(RECONNECT),
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
    const run = await runCell('none', settingsFor(config, model, 1), { mode: 'closed', concurrency, warmupMs: 1000, measureMs: config.capacityMs, deadlineMs: config.deadlineMs, sockets: concurrency, binMs: 1000 })
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
  const needSpike = config.spike && config.spikeVariants.length > 0
  const spikes: SpikeRecord[] = []
  const priorityRecords: PriorityRecord[] = []
  const models = [...config.models]
  if ((needStep || needPriorities) && !models.includes('downstream')) models.push('downstream')
  if (needSpike && !models.includes(config.spikeModel)) models.push(config.spikeModel)
  if (config.recovery !== 'off') for (const m of config.recoveryModels) if (!models.includes(m)) models.push(m)

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
    if (!variants.includes(SWEPT_VARIANT) && !(config.recovery !== 'off' && config.recoveryVariants.includes(SWEPT_VARIANT))) continue
    const candidates = config.sweep[model]
    for (const m of candidates) {
      const rate = config.sweepLoad * C
      const run = await runCell(SWEPT_VARIANT, settingsFor(config, model, m), openSpec(config, rate, C))
      const rec = { ...record(run, { repeat: 0, model, variant: `maxInFlight ${m}`, load: config.sweepLoad, rate, capacity: C }, config), maxInFlight: m }
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
  // The matrix's rows: each variant on keep-alive connections and/or on a fresh connection per request.
  const raw = config.clients.includes('raw')
  const rows = config.recovery === 'only'
    ? []
    : [...(!raw || config.reconnect === 'only' ? [] : variants), ...(!raw || config.reconnect === 'off' ? [] : variants.map((v) => v + RECONNECT)), ...(config.clients.includes('undici') ? variants.map((v) => v + UNDICI) : [])]
  const total = config.repeats * config.models.length * config.loads.length * rows.length
  let done = 0
  for (let repeat = 1; repeat <= config.repeats; repeat++) {
    for (const model of config.models) {
      const C = capacities[model]!
      for (const load of config.loads) {
        const order = rows.map((_, i) => rows[(i + rotation) % rows.length]!)
        rotation++
        for (const variant of order) {
          const rate = load * C
          const row = rowOf(variant)
          const run = await runCell(row.variant, settingsFor(config, model, goodFor(model)), openSpec(config, rate, C, row.reconnect, row.client))
          const rec = record(run, { repeat, model, variant, load, rate, capacity: C }, config)
          records.push(rec)
          done++
          log(`[${done}/${total}] r${repeat} ${model} ${load} C ${variant}: sent ${rec.achievedRate.toFixed(0)}/s, goodput ${rec.goodput.toFixed(2)} C, p99 ${rec.okP99.toFixed(1)} ms, 503 ${(rec.shedShare * 100).toFixed(0)} %, timeouts ${(rec.timeoutShare * 100).toFixed(0)} %, lag p50/p99/max ${rec.lagP50?.toFixed(1)}/${rec.lagP99.toFixed(1)}/${rec.lagMax?.toFixed(1)} ms, sockets ${rec.sockets} (C × deadline ${rec.cDeadline?.toFixed(0)}, most open ${rec.maxOpen}), others ${rec.noise.toFixed(2)} cores`)
        }
      }
    }
  }

  // Recovery: retrying clients against a trigger that ends (recovery.ts).
  const recoveries: RecoveryRecord[] = config.recovery === 'off' ? [] : await runRecovery(config, capacities, (model) => settingsFor(config, model, goodFor(model)), log)

  // The step: 0.8 C on the downstream model; the downstream slows `stepFactor`× for stepSlowMs, then recovers.
  if (needStep) {
    const C = capacities.downstream!
    const rate = config.stepLoad * C
    const measureMs = config.stepBeforeMs + config.stepSlowMs + config.stepAfterMs
    const order = variants.map((_, i) => variants[(i + rotation) % variants.length]!)
    for (const variant of order) {
      const run = await runCell(variant, settingsFor(config, 'downstream', goodFor('downstream')), { ...openSpec(config, rate, C), measureMs }, {
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

  // The spike: spikeBase × C, then spikeLoad × C for spikeMs, then spikeBase × C again, binned at spikeBinMs.
  if (needSpike) {
    const model = config.spikeModel
    const C = capacities[model]!
    const sv = config.spikeVariants
    const measureMs = config.spikeBeforeMs + config.spikeMs + config.spikeAfterMs
    for (let repeat = 1; repeat <= config.repeats; repeat++) {
      const order = sv.map((_, i) => sv[(i + rotation) % sv.length]!)
      rotation++
      for (const variant of order) {
        const spec: CellSpec = {
          ...openSpec(config, config.spikeBase * C, C),
          measureMs,
          binMs: config.spikeBinMs,
          phases: [{ atMs: config.spikeBeforeMs, rate: config.spikeLoad * C }, { atMs: config.spikeBeforeMs + config.spikeMs, rate: config.spikeBase * C }]
        }
        const run = await runCell(variant, settingsFor(config, model, goodFor(model)), spec)
        const r = run.result
        const seg = r.segments ?? []
        const baseP99 = seg[0]?.okP99 ?? Number.NaN
        const first = Math.floor(config.spikeBeforeMs / config.spikeBinMs)
        let last = -1
        let maxBinP99 = Number.NaN
        for (let b = first; b < r.bins.length; b++) {
          const bin = r.bins[b]!
          if (!Number.isNaN(bin.okP99)) maxBinP99 = Number.isNaN(maxBinP99) ? bin.okP99 : Math.max(maxBinP99, bin.okP99)
          if (bin.okP99 > 3 * baseP99 || (Number.isNaN(bin.okP99) && bin.timeouts > 0)) last = b
        }
        const rec: SpikeRecord = {
          variant, model, repeat, capacity: C,
          phases: { base: config.spikeBase, spike: config.spikeLoad, beforeMs: config.spikeBeforeMs, spikeMs: config.spikeMs, afterMs: config.spikeAfterMs, binMs: config.spikeBinMs },
          sockets: r.sockets, cDeadline: C * config.deadlineMs / 1000, deadlineMs: config.deadlineMs,
          baseP99, maxBinP99,
          recoveryMs: Number.isNaN(baseP99) ? Number.NaN : last < 0 ? 0 : (last + 1) * config.spikeBinMs - config.spikeBeforeMs,
          spikeGoodput: (seg[1]?.goodput ?? Number.NaN) / C, spikeShed: seg[1]?.shed ?? Number.NaN, spikeTimeouts: seg[1]?.timeouts ?? Number.NaN,
          lagP99: r.lagP99, lagMax: r.lagMax, bins: r.bins, noise: run.noise
        }
        spikes.push(rec)
        log(`spike r${repeat} ${model} ${variant}: baseline p99 ${rec.baseP99.toFixed(1)} ms, worst bin ${rec.maxBinP99.toFixed(1)} ms, back under 3× after ${rec.recoveryMs.toFixed(0)} ms, lag p99/max ${r.lagP99.toFixed(1)}/${r.lagMax.toFixed(1)} ms, sockets ${r.sockets}, others ${run.noise.toFixed(2)} cores`)
      }
    }
  }

  // Priorities: sheddable traffic at prioritySheddable × C to `/sheddable` and critical traffic at
  // priorityCritical × C to `/critical`, in one open loop on the downstream model.
  if (needPriorities) {
    const C = capacities.downstream!
    for (let repeat = 1; repeat <= config.repeats; repeat++) {
      for (const variant of config.priorityVariants) {
        const spec = { ...openSpec(config, config.prioritySheddable * C, C), mix: { path: '/critical', mainPath: '/sheddable', rate: config.priorityCritical * C } }
        const run = await runCell(variant, settingsFor(config, 'downstream', goodFor('downstream')), spec)
        const streams = run.result.streams!
        const r = run.result
        const rec: PriorityRecord = { variant, repeat, capacity: C, sheddable: streams.main, critical: streams.mixed, noise: run.noise, targetRate: r.targetRate, achievedRate: r.achievedRate, lagP99: r.lagP99, lagMax: r.lagMax, sockets: r.sockets, cDeadline: C * config.deadlineMs / 1000, deadlineMs: config.deadlineMs }
        priorityRecords.push(rec)
        log(`priorities r${repeat} ${variant}: critical ${(rec.critical.goodput / Math.max(1, rec.critical.offered) * 100).toFixed(1)} % of offered (p99 ${Number(rec.critical.okP99).toFixed(1)} ms), sheddable goodput ${(rec.sheddable.goodput / C).toFixed(2)} C, sent ${r.achievedRate.toFixed(0)}/${r.targetRate.toFixed(0)} per s, lag p99/max ${r.lagP99.toFixed(1)}/${r.lagMax.toFixed(1)} ms, sockets ${r.sockets}, others ${run.noise.toFixed(2)} cores`)
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
  print(`Deadline ${config.deadlineMs} ms; generator connections at most ${models.map((m) => `${socketsFor(config, capacities[m]!)} for ${m} (C × deadline = ${Math.round(capacities[m]! * config.deadlineMs / 1000)})`).join(', ')}${config.sockets > 0 ? ' (OVERLOAD_SOCKETS)' : ' (max(2 × C × deadline, 64))'}, ${config.maxConnecting} connecting at most; warm-up ${config.warmupMs} ms, measured ${config.measureMs} ms per cell; run took ${runSeconds.toFixed(0)} s.`)
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
  for (const model of rows.length === 0 ? [] : config.models) {
    print()
    print(`## ${model} (C = ${capacities[model]!.toFixed(0)} req/s)`)
    print()
    print(matrixTable(records, model, rows, config.loads, config.repeats))
  }
  if (steps.length > 0) {
    print()
    print(`## Step: downstream at ${config.stepLoad} C (${steps[0]!.rate.toFixed(0)} req/s), ${config.stepFactor}× slower from ${config.stepBeforeMs / 1000} s to ${(config.stepBeforeMs + config.stepSlowMs) / 1000} s`)
    print()
    print('Per second of the measured window (requests binned by their scheduled second): goodput / C and p99 of the 200s.')
    print()
    print(stepTable(steps))
  }
  if (recoveries.length > 0) {
    print()
    print(`## Recovery: clients that retry (${config.retry.retries} retries, ${config.retry.delayMs} ms after an attempt ends, on ${config.retry.on.join(', ')}, no jitter, \`Retry-Attempt: n\` on every attempt)`)
    print()
    print(recoveryTables(recoveries, config))
  }
  if (spikes.length > 0) {
    const C = capacities[config.spikeModel]!
    print()
    print(`## Spike: ${config.spikeModel} at ${config.spikeBase} C (${Math.round(config.spikeBase * C)}/s), ${config.spikeLoad} C (${Math.round(config.spikeLoad * C)}/s) from ${config.spikeBeforeMs / 1000} s for ${config.spikeMs / 1000} s, then back`)
    print()
    print(`Requests binned by scheduled time in ${config.spikeBinMs} ms bins. Baseline: p99 of the 200s in the steady ${config.spikeBase} C phase before the spike; "back under 3 × baseline after": ms from the spike's start to the end of the last bin whose p99 of 200s is over 3 × the baseline (or that had timeouts and no 200). Bins in the results JSON.`)
    print()
    print(spikeTable(spikes))
  }
  if (priorityRecords.length > 0) {
    print()
    print(`## Priorities: downstream, sheddable at ${config.prioritySheddable} C and critical at ${config.priorityCritical} C`)
    print()
    print(priorityTable(priorityRecords, config.priorityVariants))
  }
  print()
  print('Cells: median of the repeats, (min–max) when they differ. "+reconnect": every request on a fresh connection, closed after its answer. "sockets (C × deadline)": the generator\'s connection cap and, to check it against, the requests outstanding at C when every answer takes the deadline; "most open": the most connections open at once. "↳ never sent": timeouts that expired before being written to a connection (in the generator\'s FIFO, or waiting for a connect the server had not accepted); "client queued": requests that waited > 1 ms for a connection; "gen lag": issue time − scheduled time; ⚠ generator behind: in some repeat the generator did not keep the schedule (sent under 95 % of the rate, or lag p99 over 10 % of the deadline): read that row as the generator\'s limit, not the server\'s; "wasted work": handlers that finished after their client had gone; "other CPU": cores taken by processes other than this cell\'s server and generator.')

  const out = `bench/results-overload-${config.out}.json`
  writeFileSync(new URL(out, `file://${root}`), JSON.stringify({
    started: started.toISOString(), finished: finished.toISOString(), runSeconds, commit, dirty, node: process.version, cpu: cpus()[0]?.model,
    config, variants: VARIANTS.filter((v) => variants.includes(v.name)).map((v) => ({ name: v.name, description: v.description })),
    capacity: capacities, probes, good, goodFrom, sweep: sweepRecords, cells: records, recoveries, steps, spikes, priorities: priorityRecords, chart: chartInput,
    sockets: Object.fromEntries(models.map((m) => [m, socketsFor(config, capacities[m]!)]))
  }, null, 2) + '\n')
  if (config.chart !== undefined) writeFileSync(new URL(config.chart, `file://${root}`), chart(chartInput))
  log(`wrote ${out}${config.chart === undefined ? ' (no chart: OVERLOAD_CHART unset)' : ` and ${config.chart}`} (${runSeconds.toFixed(0)} s)`)
}

process.on('SIGINT', () => { killAll(); process.exit(130) })
main().then(() => { killAll(); process.exit(0) }, (error: unknown) => { killAll(); log(String((error as Error).stack ?? error)); process.exit(1) })
