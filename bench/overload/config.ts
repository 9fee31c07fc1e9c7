// The overload benchmark's settings, from OVERLOAD_* environment variables (defaults in brackets).
import type { ClientName, RetrySpec } from './load.js'
import { MODELS, type ModelName } from './work.js'
import { VARIANTS } from './variants.js'

export interface OverloadConfig {
  /** OVERLOAD_REPEATS [3]: runs of every cell, interleaved. */
  repeats: number
  /** OVERLOAD_WARMUP_MS [1000], OVERLOAD_MEASURE_MS [5000]: each cell's warm-up and measured window. */
  warmupMs: number
  measureMs: number
  /** OVERLOAD_DEADLINE_MS [1000]: the client's deadline. */
  deadlineMs: number
  /** OVERLOAD_SOCKETS [auto]: the most connections the generator opens at once; auto (unset or 0):
   * max(2 × C × deadline, 64), computed per model once C is measured, so the pool never bounds outstanding
   * requests below C × deadline (which would turn the open loop into a closed one).
   * OVERLOAD_MAX_CONNECTING [256]: connects in flight at most. */
  sockets: number
  maxConnecting: number
  /** OVERLOAD_RECONNECT [1]: 0 keep-alive cells only; 1 also every matrix cell on a fresh connection per
   * request (`Connection: close`, a reconnect storm; the variant shows as "<variant> +reconnect"); `only`: those only. */
  reconnect: 'off' | 'also' | 'only'
  /** OVERLOAD_LOADS [0.5,1,2,4,8,16]: offered load as multiples of C. */
  loads: number[]
  /** OVERLOAD_MODELS [cpu,downstream]. */
  models: ModelName[]
  /** OVERLOAD_VARIANTS [all, in the table's order]. */
  variants: string[]
  /** OVERLOAD_CPU_MS [1], OVERLOAD_POOL [16], OVERLOAD_OP_MS [5]: the work models. */
  cpuMs: number
  poolSize: number
  opMs: number
  /** OVERLOAD_CAPACITY_MS [3000]: the closed-loop capacity probe's window (after a 1 s warm-up). */
  capacityMs: number
  /** OVERLOAD_GOOD ["cpu:N,downstream:M"]: skip the sweep and use these. */
  good: Partial<Record<ModelName, number>>
  /** OVERLOAD_SWEEP ["cpu:1,2,4,8;downstream:8,16,32,64"], OVERLOAD_SWEEP_LOAD [2]: the maxInFlight sweep, at that multiple of C.
   * OVERLOAD_SWEEP_FALLBACK ["cpu:2;downstream:32"]: used when no candidate reaches 0.05 C of goodput (an inconclusive sweep). */
  sweep: Record<ModelName, number[]>
  sweepLoad: number
  sweepFallback: Record<ModelName, number>
  /** OVERLOAD_STEP [1]: run the step; OVERLOAD_STEP_LOAD [0.8] (of C, downstream model), OVERLOAD_STEP_FACTOR [4],
   * OVERLOAD_STEP_BEFORE_MS [5000], OVERLOAD_STEP_SLOW_MS [10000], OVERLOAD_STEP_AFTER_MS [10000]. */
  step: boolean
  stepLoad: number
  stepFactor: number
  stepBeforeMs: number
  stepSlowMs: number
  stepAfterMs: number
  /** OVERLOAD_SPIKE [1]: run the spike on OVERLOAD_SPIKE_MODEL [cpu]: OVERLOAD_SPIKE_BASE [0.7] × C for
   * OVERLOAD_SPIKE_BEFORE_MS [3000], OVERLOAD_SPIKE_LOAD [1.4] × C for OVERLOAD_SPIKE_MS [3000], back to the base
   * for OVERLOAD_SPIKE_AFTER_MS [4000], binned at OVERLOAD_SPIKE_BIN_MS [10]; OVERLOAD_SPIKE_VARIANTS [the matrix's]. */
  spike: boolean
  spikeModel: ModelName
  spikeBase: number
  spikeLoad: number
  spikeBeforeMs: number
  spikeMs: number
  spikeAfterMs: number
  spikeBinMs: number
  spikeVariants: string[]
  /** OVERLOAD_PRIORITIES [1]: run the priorities scenario (downstream model): sheddable traffic at
   * OVERLOAD_PRIORITY_SHEDDABLE [12] × C and critical traffic at OVERLOAD_PRIORITY_CRITICAL [0.2] × C, mixed in one
   * open loop; OVERLOAD_PRIORITY_VARIANTS [admission-adaptive,admission-good,none]. */
  priorities: boolean
  prioritySheddable: number
  priorityCritical: number
  priorityVariants: string[]
  /** OVERLOAD_CLIENT [raw]: the clients that drive every cell, `raw` (the generator's sockets) and/or `undici`
   * (an undici Pool of the same connection cap, one request at a time each); undici rows read "<variant> [undici]". */
  clients: ClientName[]
  /** OVERLOAD_UNDICI_CONNECTIONS [2048]: the undici Pool's connections (the setup), instead of the raw client's cap. */
  undiciConnections: number
  /** OVERLOAD_RECOVERY [0]: run the recovery benchmark, clients that retry (OVERLOAD_RETRIES [3] more attempts,
   * OVERLOAD_RETRY_DELAY_MS [0] after an attempt ends, on OVERLOAD_RETRY_ON [503,timeout,error]) against a trigger:
   * OVERLOAD_RECOVERY_BASE [0.8] × C for OVERLOAD_RECOVERY_BEFORE_MS [3000], then for OVERLOAD_RECOVERY_TRIGGER_MS
   * [10000] OVERLOAD_RECOVERY_LOAD [4] × C (cpu) or the downstream OVERLOAD_RECOVERY_SLOW [5] × slower at the base
   * rate (downstream), then the base rate for OVERLOAD_RECOVERY_AFTER_MS [10000]; on OVERLOAD_RECOVERY_MODELS
   * [cpu,downstream], OVERLOAD_RECOVERY_VARIANTS [none,up-tuned,admission-good,admission-auto], each client of
   * OVERLOAD_CLIENT, OVERLOAD_REPEATS times. OVERLOAD_RECOVERY=only: the recovery benchmark alone (no matrix). */
  recovery: 'off' | 'also' | 'only'
  recoveryModels: ModelName[]
  /** OVERLOAD_RECOVERY_CLIENT [OVERLOAD_CLIENT's]: the clients of the recovery cells. */
  recoveryClients: ClientName[]
  recoveryVariants: string[]
  recoveryBase: number
  recoveryLoad: number
  recoverySlow: number
  recoveryBeforeMs: number
  recoveryTriggerMs: number
  recoveryAfterMs: number
  retry: RetrySpec
  /** OVERLOAD_OUT [timestamp]: bench/results-overload-<OUT>.json. */
  out: string
  /** OVERLOAD_CHART [unset: no chart]: a path to write the chart to, or `1` for the tracked bench/overload/chart.svg. */
  chart: string | undefined
}

const env = process.env
const num = (name: string, fallback: number): number => {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name}=${raw}: not a non-negative number`)
  return value
}
const list = (name: string, fallback: string): string[] => (env[name] ?? fallback).split(',').map((s) => s.trim()).filter((s) => s !== '')

function perModel (name: string, fallback: string): Record<string, number[]> {
  const out: Record<string, number[]> = {}
  for (const part of (env[name] ?? fallback).split(';').filter((p) => p.trim() !== '')) {
    const [model, values = ''] = part.split(':')
    if (!MODELS.includes(model!.trim() as ModelName)) throw new Error(`${name}: unknown model ${model}`)
    out[model!.trim()] = values.split(',').map(Number).filter((v) => Number.isInteger(v) && v > 0)
  }
  return out
}

/** An `0 | 1 | only` setting: off, also (beside the rest), or only that. */
function offAlsoOnly (name: string, fallback: string): 'off' | 'also' | 'only' {
  const raw = env[name] ?? fallback
  if (raw === '0' || raw === '') return 'off'
  if (raw === '1') return 'also'
  if (raw === 'only') return 'only'
  throw new Error(`${name}=${raw}: 0, 1 or only`)
}

/** The generator's connection cap for a model of capacity C: OVERLOAD_SOCKETS, or max(2 × C × deadline, 64); undici's Pool: OVERLOAD_UNDICI_CONNECTIONS. */
export function socketsFor (config: OverloadConfig, capacity: number, client: ClientName = 'raw'): number {
  if (client === 'undici') return config.undiciConnections
  return config.sockets > 0 ? config.sockets : Math.max(64, Math.ceil(2 * capacity * config.deadlineMs / 1000))
}

function variantList (name: string, fallback: string): string[] {
  const out = list(name, fallback)
  for (const v of out) if (!VARIANTS.some((x) => x.name === v)) throw new Error(`${name}: unknown variant ${v}`)
  return out
}

function enumList<T extends string> (name: string, fallback: string, known: readonly T[]): T[] {
  const out = list(name, fallback)
  for (const v of out) if (!known.includes(v as T)) throw new Error(`${name}: ${v} is not one of ${known.join(', ')}`)
  return out as T[]
}

export function readConfig (): OverloadConfig {
  const models = list('OVERLOAD_MODELS', MODELS.join(',')) as ModelName[]
  for (const m of models) if (!MODELS.includes(m)) throw new Error(`OVERLOAD_MODELS: unknown model ${m}`)
  const variants = list('OVERLOAD_VARIANTS', VARIANTS.map((v) => v.name).join(','))
  for (const v of variants) if (!VARIANTS.some((x) => x.name === v)) throw new Error(`OVERLOAD_VARIANTS: unknown variant ${v}`)
  for (const v of list('OVERLOAD_PRIORITY_VARIANTS', '')) if (!VARIANTS.some((x) => x.name === v)) throw new Error(`OVERLOAD_PRIORITY_VARIANTS: unknown variant ${v}`)
  const spikeModel = (env.OVERLOAD_SPIKE_MODEL ?? 'cpu') as ModelName
  if (!MODELS.includes(spikeModel)) throw new Error(`OVERLOAD_SPIKE_MODEL: unknown model ${spikeModel}`)
  const spikeVariants = list('OVERLOAD_SPIKE_VARIANTS', variants.join(','))
  for (const v of spikeVariants) if (!VARIANTS.some((x) => x.name === v)) throw new Error(`OVERLOAD_SPIKE_VARIANTS: unknown variant ${v}`)
  const good: Partial<Record<ModelName, number>> = {}
  for (const [model, values] of Object.entries(perModel('OVERLOAD_GOOD', ''))) good[model as ModelName] = values[0]!
  const sweep = { cpu: [1, 2, 4, 8], downstream: [8, 16, 32, 64], ...perModel('OVERLOAD_SWEEP', '') }
  return {
    repeats: Math.max(1, Math.round(num('OVERLOAD_REPEATS', 3))),
    warmupMs: num('OVERLOAD_WARMUP_MS', 1000),
    measureMs: Math.max(100, num('OVERLOAD_MEASURE_MS', 5000)),
    deadlineMs: num('OVERLOAD_DEADLINE_MS', 1000),
    sockets: Math.round(num('OVERLOAD_SOCKETS', 0)),
    maxConnecting: Math.max(1, Math.round(num('OVERLOAD_MAX_CONNECTING', 256))),
    reconnect: offAlsoOnly('OVERLOAD_RECONNECT', '1'),
    loads: list('OVERLOAD_LOADS', '0.5,1,2,4,8,16').map(Number),
    models,
    variants,
    cpuMs: num('OVERLOAD_CPU_MS', 1),
    poolSize: Math.max(1, Math.round(num('OVERLOAD_POOL', 16))),
    opMs: num('OVERLOAD_OP_MS', 5),
    capacityMs: Math.max(500, num('OVERLOAD_CAPACITY_MS', 3000)),
    good,
    sweep,
    sweepLoad: num('OVERLOAD_SWEEP_LOAD', 2),
    sweepFallback: Object.fromEntries(Object.entries({ cpu: [2], downstream: [32], ...perModel('OVERLOAD_SWEEP_FALLBACK', '') }).map(([m, v]) => [m, v[0]!])) as Record<ModelName, number>,
    step: num('OVERLOAD_STEP', 1) !== 0,
    stepLoad: num('OVERLOAD_STEP_LOAD', 0.8),
    stepFactor: num('OVERLOAD_STEP_FACTOR', 4),
    stepBeforeMs: num('OVERLOAD_STEP_BEFORE_MS', 5000),
    stepSlowMs: num('OVERLOAD_STEP_SLOW_MS', 10_000),
    stepAfterMs: num('OVERLOAD_STEP_AFTER_MS', 10_000),
    spike: num('OVERLOAD_SPIKE', 1) !== 0,
    spikeModel,
    spikeBase: num('OVERLOAD_SPIKE_BASE', 0.7),
    spikeLoad: num('OVERLOAD_SPIKE_LOAD', 1.4),
    spikeBeforeMs: num('OVERLOAD_SPIKE_BEFORE_MS', 3000),
    spikeMs: num('OVERLOAD_SPIKE_MS', 3000),
    spikeAfterMs: num('OVERLOAD_SPIKE_AFTER_MS', 4000),
    spikeBinMs: Math.max(1, num('OVERLOAD_SPIKE_BIN_MS', 10)),
    spikeVariants,
    priorities: num('OVERLOAD_PRIORITIES', 1) !== 0,
    prioritySheddable: num('OVERLOAD_PRIORITY_SHEDDABLE', 12),
    priorityCritical: num('OVERLOAD_PRIORITY_CRITICAL', 0.2),
    priorityVariants: list('OVERLOAD_PRIORITY_VARIANTS', 'admission-adaptive,admission-good,none'),
    clients: enumList<ClientName>('OVERLOAD_CLIENT', 'raw', ['raw', 'undici']),
    undiciConnections: Math.max(1, Math.round(num('OVERLOAD_UNDICI_CONNECTIONS', 2048))),
    recovery: offAlsoOnly('OVERLOAD_RECOVERY', '0'),
    recoveryModels: enumList<ModelName>('OVERLOAD_RECOVERY_MODELS', MODELS.join(','), MODELS),
    recoveryClients: enumList<ClientName>('OVERLOAD_RECOVERY_CLIENT', env.OVERLOAD_CLIENT ?? 'raw', ['raw', 'undici']),
    recoveryVariants: variantList('OVERLOAD_RECOVERY_VARIANTS', 'none,up-tuned,admission-good,admission-auto'),
    recoveryBase: num('OVERLOAD_RECOVERY_BASE', 0.8),
    recoveryLoad: num('OVERLOAD_RECOVERY_LOAD', 4),
    recoverySlow: num('OVERLOAD_RECOVERY_SLOW', 5),
    recoveryBeforeMs: num('OVERLOAD_RECOVERY_BEFORE_MS', 3000),
    recoveryTriggerMs: num('OVERLOAD_RECOVERY_TRIGGER_MS', 10_000),
    recoveryAfterMs: num('OVERLOAD_RECOVERY_AFTER_MS', 10_000),
    retry: { retries: Math.min(250, Math.round(num('OVERLOAD_RETRIES', 3))), delayMs: num('OVERLOAD_RETRY_DELAY_MS', 0), on: enumList('OVERLOAD_RETRY_ON', '503,timeout,error', ['503', 'timeout', 'error'] as const) },
    out: env.OVERLOAD_OUT ?? new Date().toISOString().replace(/[:.]/g, '-'),
    chart: env.OVERLOAD_CHART === undefined || env.OVERLOAD_CHART === '' ? undefined : env.OVERLOAD_CHART === '1' ? 'bench/overload/chart.svg' : env.OVERLOAD_CHART
  }
}
