import { AdmissionOptionError } from '../validation/errors.js'
import { exactObject } from '../validation/checks.js'

/**
 * What the plugin needs of a prom-client `Registry`, by shape: a `Registry` from another copy
 * of prom-client than the one this package loads (two versions installed) is still one.
 */
export interface MetricsRegistry {
  registerMetric (metric: never): void
  getSingleMetric (name: string): unknown
  removeSingleMetric (name: string): void
}

export interface AdmissionMetricsOptions {
  /** The prom-client `Registry` to report to (prom-client's global `register`, or one of the app's). */
  registry: MetricsRegistry
  /** Start of every metric name (default `fastify_admission_`). */
  prefix?: string
  /**
   * The `registration` label of this registration's series (default: its address, `app`,
   * `app/child@%2Fapi`…). Two registrations reporting to one registry need different ones:
   * two apps in one process, each registering at its root, set it.
   */
  registration?: string
  /** Upper bounds (seconds) of the backend decision latency histogram's buckets, increasing. */
  buckets?: readonly number[]
}

export interface MetricsSettings {
  readonly registry: MetricsRegistry
  readonly prefix: string
  readonly registration: string | undefined
  readonly buckets: readonly number[]
}

export const DEFAULT_PREFIX = 'fastify_admission_'
/** A Redis round trip on a LAN is 0.1–1 ms; a timeout is usually tens of ms to a second. */
export const DEFAULT_BUCKETS: readonly number[] = Object.freeze([0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5])

const complain = AdmissionOptionError.complain
const SHAPE = { keys: ['registry', 'prefix', 'registration', 'buckets'], expected: 'an object { registry, prefix?, registration?, buckets? }', nullPrototype: true, options: true }
// Prometheus' metric name grammar; the prefix is the start of one.
const PREFIX = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/

function isRegistry (value: unknown): value is MetricsRegistry {
  const candidate = value as Partial<Record<keyof MetricsRegistry, unknown>> | null
  return typeof candidate === 'object' && candidate !== null && typeof candidate.registerMetric === 'function' &&
    typeof candidate.getSingleMetric === 'function' && typeof candidate.removeSingleMetric === 'function'
}

function bucketsOption (value: unknown): readonly number[] {
  if (value === undefined) return DEFAULT_BUCKETS
  const expected = 'an array of 1 to 32 increasing positive finite numbers (seconds)'
  if (!Array.isArray(value) || value.length === 0 || value.length > 32) throw new AdmissionOptionError('metrics.buckets', expected, value)
  let previous = 0
  for (const bound of value as unknown[]) {
    if (typeof bound !== 'number' || !Number.isFinite(bound) || bound <= previous) throw new AdmissionOptionError('metrics.buckets', expected, value)
    previous = bound
  }
  return Object.freeze([...(value as number[])])
}

/** The `metrics` option, checked at registration; undefined when absent (no metrics, nothing loaded). */
export function metricsOption (value: unknown): MetricsSettings | undefined {
  if (value === undefined) return undefined
  const input = exactObject(complain, 'metrics', value, SHAPE)
  if (!isRegistry(input.registry)) {
    throw new AdmissionOptionError('metrics.registry', "a prom-client Registry (prom-client's `register`, or `new Registry()`)", input.registry)
  }
  const prefix = input.prefix === undefined ? DEFAULT_PREFIX : input.prefix
  if (typeof prefix !== 'string' || !PREFIX.test(prefix)) {
    throw new AdmissionOptionError('metrics.prefix', 'the start of a Prometheus metric name (letters, digits, `_` and `:`, not starting with a digit)', prefix)
  }
  const registration = input.registration
  if (registration !== undefined && (typeof registration !== 'string' || registration.length === 0 || registration.length > 128)) {
    throw new AdmissionOptionError('metrics.registration', 'a string of 1 to 128 characters', registration)
  }
  return Object.freeze({ registry: input.registry, prefix, registration, buckets: bucketsOption(input.buckets) })
}
