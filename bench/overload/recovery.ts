// The recovery benchmark (issue 36, item 1): clients that retry as default clients do, against a
// trigger that ends — on the cpu model the load jumps to recoveryLoad × C, on the downstream model
// the downstream turns recoverySlow × slower — then the base load again. The question is whether the
// server gets back to serving the base load once the trigger is gone, or whether the retries keep it
// overloaded (a metastable failure). Per second: goodput, the retries' share of what was sent, p99.
import { runCell } from './cell.js'
import { type OverloadConfig, socketsFor } from './config.js'
import type { CellSpec, ClientName } from './load.js'
import { recoveredAfter, type Second } from './seconds.js'
import type { ServerSettings, TracePoint } from './server.js'
import { latencySpread, spread } from './stats.js'
import type { ModelName } from './work.js'

export interface RecoveryRecord {
  model: ModelName
  variant: string
  client: ClientName
  repeat: number
  capacity: number
  /** The window's seconds, by due time: the trigger runs from `beforeS` for `triggerS`. */
  seconds: Second[]
  beforeS: number
  triggerS: number
  /** First attempts in the window, and handlers that finished for a client that had gone. */
  firstAttempts: number
  wastedShare: number
  trace: TracePoint[]
  noise: number
  lagP99: number
}

/** Goodput at or above this share of the base load counts as recovered (the base is under C: 0.9 C cannot be reached at 0.8 C offered). */
export const RECOVERED_SHARE = 0.9

export async function runRecovery (
  config: OverloadConfig,
  capacities: Partial<Record<ModelName, number>>,
  settingsFor: (model: ModelName) => ServerSettings,
  log: (line: string) => void
): Promise<RecoveryRecord[]> {
  const records: RecoveryRecord[] = []
  const { recoveryBeforeMs: before, recoveryTriggerMs: trigger, recoveryAfterMs: after } = config
  let rotation = 0
  for (let repeat = 1; repeat <= config.repeats; repeat++) {
    for (const model of config.recoveryModels) {
      const C = capacities[model]!
      for (const client of config.recoveryClients) {
        const vs = config.recoveryVariants
        const order = vs.map((_, i) => vs[(i + rotation) % vs.length]!)
        rotation++
        for (const variant of order) {
          const spec: CellSpec = {
            mode: 'open', rate: config.recoveryBase * C, warmupMs: config.warmupMs, measureMs: before + trigger + after, deadlineMs: config.deadlineMs,
            sockets: socketsFor(config, C, client), maxConnecting: config.maxConnecting, binMs: 1000, client, retry: config.retry,
            ...(model === 'cpu' ? { phases: [{ atMs: before, rate: config.recoveryLoad * C }, { atMs: before + trigger, rate: config.recoveryBase * C }] } : {})
          }
          const run = await runCell(variant, settingsFor(model), spec, model === 'cpu'
            ? {}
            : {
                onStarted: (server) => {
                  setTimeout(() => { server.send({ slow: config.recoverySlow }) }, before).unref()
                  setTimeout(() => { server.send({ slow: 1 }) }, before + trigger).unref()
                }
              })
          const r = run.result
          const rec: RecoveryRecord = {
            model, variant, client, repeat, capacity: C, seconds: r.seconds ?? [], beforeS: before / 1000, triggerS: trigger / 1000,
            firstAttempts: r.firstAttempts ?? 0, wastedShare: run.server.handled === 0 ? 0 : run.server.wasted / run.server.handled,
            trace: run.server.trace, noise: run.noise, lagP99: r.lagP99
          }
          records.push(rec)
          const back = recoveredAfter(rec.seconds.map((s) => s.goodput / C), rec.beforeS + rec.triggerS, RECOVERED_SHARE * config.recoveryBase)
          log(`recovery r${repeat} ${model} ${client} ${variant}: ${rec.seconds.map((s) => (s.goodput / C).toFixed(2)).join(' ')}; retries ${rec.seconds.map((s) => (s.retryShare * 100).toFixed(0)).join(' ')} %; back after ${Number.isNaN(back) ? 'never' : `${back} s`}, others ${run.noise.toFixed(2)} cores`)
        }
      }
    }
  }
  return records
}

/** First attempts' share of the 200s over `seconds` (weighted by each second's 200s). */
function firstShare (seconds: readonly Second[]): number {
  const ok = seconds.reduce((a, s) => a + s.goodput, 0)
  return ok === 0 ? Number.NaN : seconds.reduce((a, s) => a + (Number.isNaN(s.firstOk) ? 0 : s.firstOk * s.goodput), 0) / ok
}

const f2 = (x: number): string => (Number.isNaN(x) ? '–' : x.toFixed(2))
const ms = (x: number): string => (Number.isNaN(x) ? '–' : x >= 100 ? x.toFixed(0) : x.toFixed(1))
const pct = (x: number): string => (Number.isNaN(x) ? '–' : `${(x * 100).toFixed(0)} %`)

/** Seconds to recovery over the repeats: "2 s", "1–3 s", "never" (some repeat never got back), per repeat when they differ. */
function backText (values: number[]): string {
  if (values.some(Number.isNaN)) return values.every(Number.isNaN) ? 'never' : values.map((v) => (Number.isNaN(v) ? 'never' : `${v} s`)).join(', ')
  const s = spread(values)
  return s.min === s.max ? `${s.median} s` : `${s.min}–${s.max} s`
}

/**
 * One table per (model, client): a row per second from the one before the trigger to the end, a
 * column per variant, "goodput / C · retries' share · p99 of the 200s (ms)", medians of the repeats;
 * then each variant's time back to RECOVERED_SHARE of the base load and whether that meets the target.
 */
export function recoveryTables (records: readonly RecoveryRecord[], config: OverloadConfig): string {
  const out: string[] = []
  const threshold = RECOVERED_SHARE * config.recoveryBase
  for (const model of config.recoveryModels) {
    for (const client of config.recoveryClients) {
      const rs = records.filter((r) => r.model === model && r.client === client)
      if (rs.length === 0) continue
      const variants = config.recoveryVariants.filter((v) => rs.some((r) => r.variant === v))
      const { beforeS, triggerS, capacity: C } = rs[0]!
      const n = Math.max(...rs.map((r) => r.seconds.length))
      const trigger = model === 'cpu' ? `${config.recoveryLoad} C offered` : `the downstream ${config.recoverySlow} × slower`
      out.push(`### ${model}, ${client} client: ${config.recoveryBase} C, ${trigger} from ${beforeS} s to ${beforeS + triggerS} s, then ${config.recoveryBase} C`)
      out.push('')
      out.push('Per second of the window (attempts binned by due time), per variant: goodput / C · retries\' share of the requests sent · p99 of the 200s (ms); medians of the repeats.')
      out.push('')
      out.push(`| s | ${variants.join(' | ')} |`)
      out.push(`| --- | ${variants.map(() => '---').join(' | ')} |`)
      for (let s = Math.max(0, beforeS - 1); s < n; s++) {
        const cells = variants.map((v) => {
          const secs = rs.filter((r) => r.variant === v).map((r) => r.seconds[s]).filter((x): x is Second => x !== undefined)
          return `${f2(spread(secs.map((x) => x.goodput / C)).median)} · ${pct(spread(secs.map((x) => x.retryShare)).median)} · ${ms(latencySpread(secs.map((x) => x.okP99)).median)}`
        })
        const phase = s < beforeS ? 'before' : s < beforeS + triggerS ? 'trigger' : `after +${s - beforeS - triggerS}`
        out.push(`| ${s} (${phase}) | ${cells.join(' | ')} |`)
      }
      out.push('')
      out.push(`Back to ≥ ${f2(threshold)} C (${RECOVERED_SHARE} × the ${config.recoveryBase} C offered) and staying there, counted from the trigger's end; target with admission-auto: within 2 s.`)
      out.push('')
      out.push('| variant | back after | target (≤ 2 s) | goodput / C in the trigger | retries\' share in the trigger | first attempts\' share of the 200s in the trigger | retries\' share after | wasted work | gen lag p99 (ms) | other CPU (cores) |')
      out.push('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |')
      for (const v of variants) {
        const vr = rs.filter((r) => r.variant === v)
        const backs = vr.map((r) => recoveredAfter(r.seconds.map((x) => x.goodput / C), beforeS + triggerS, threshold))
        const mean = (r: RecoveryRecord, from: number, to: number, pick: (x: Second) => number): number => {
          const xs = r.seconds.slice(from, to).map(pick).filter((x) => !Number.isNaN(x))
          return xs.length === 0 ? Number.NaN : xs.reduce((a, b) => a + b, 0) / xs.length
        }
        const met = backs.every((b) => !Number.isNaN(b) && b <= 2)
        out.push(`| ${v} | ${backText(backs)} | ${met ? 'met' : 'missed'} | ${f2(spread(vr.map((r) => mean(r, beforeS, beforeS + triggerS, (x) => x.goodput / C))).median)} | ${pct(spread(vr.map((r) => mean(r, beforeS, beforeS + triggerS, (x) => x.retryShare))).median)} | ${pct(spread(vr.map((r) => firstShare(r.seconds.slice(beforeS, beforeS + triggerS)))).median)} | ${pct(spread(vr.map((r) => mean(r, beforeS + triggerS, n, (x) => x.retryShare))).median)} | ${pct(spread(vr.map((r) => r.wastedShare)).median)} | ${ms(spread(vr.map((r) => r.lagP99)).median)} | ${f2(spread(vr.map((r) => r.noise)).median)} |`)
      }
      out.push('')
    }
  }
  return out.join('\n')
}
