import { AdmissionOptionError } from '../validation/errors.js'
import { exactObject } from '../validation/checks.js'
import { missingMeterMethod, type MetricsMeter } from './meter.js'
import { LONGEST_INSTRUMENT_NAME } from './instrument-names.js'

/**
 * What the plugin needs of a prom-client `Registry`, by shape: a `Registry` from another copy
 * of prom-client than the one this package loads (two versions installed) is still one.
 */
export interface MetricsRegistry {
  registerMetric (metric: never): void
  getSingleMetric (name: string): unknown
  removeSingleMetric (name: string): void
}

interface CommonMetricsOptions {
  /**
   * Start of every metric name: a Prometheus name start for a `registry` (default
   * `fastify_admission_`), an OpenTelemetry instrument name start for a `meter` (default `fastify.admission.`).
   */
  prefix?: string
  /**
   * The `registration` label (attribute) of this registration's series (default: its address, `app`,
   * `app/child@%2Fapi`…). Two registrations reporting to one registry (Meter) need different ones:
   * two apps in one process, each registering at its root, set it.
   */
  registration?: string
  /** Upper bounds (seconds) of the backend decision latency histogram's buckets, increasing. */
  buckets?: readonly number[]
}

/** Prometheus metrics through prom-client (an optional peer, loaded only with this option). */
export interface PrometheusMetricsOptions extends CommonMetricsOptions {
  /** The prom-client `Registry` to report to (prom-client's global `register`, or one of the app's). */
  registry: MetricsRegistry
  meter?: never
}

/** OpenTelemetry metrics through the app's Meter (nothing loaded: the Meter makes the instruments). */
export interface OpenTelemetryMetricsOptions extends CommonMetricsOptions {
  /** An `@opentelemetry/api` Meter: `metrics.getMeter('my-app')`, or the app's own MeterProvider's. */
  meter: MetricsMeter
  registry?: never
}

/** Either a prom-client `registry` or an OpenTelemetry `meter`, not both (docs/decisions.md). */
export type AdmissionMetricsOptions = PrometheusMetricsOptions | OpenTelemetryMetricsOptions

interface CommonSettings {
  readonly prefix: string
  readonly registration: string | undefined
  readonly buckets: readonly number[]
}

export interface PrometheusSettings extends CommonSettings {
  readonly registry: MetricsRegistry
  readonly meter?: undefined
}

export interface OpenTelemetrySettings extends CommonSettings {
  readonly meter: MetricsMeter
  readonly registry?: undefined
}

export type MetricsSettings = PrometheusSettings | OpenTelemetrySettings

export const DEFAULT_PREFIX = 'fastify_admission_'
export const DEFAULT_OTEL_PREFIX = 'fastify.admission.'
/** A Redis round trip on a LAN is 0.1–1 ms; a timeout is usually tens of ms to a second. */
export const DEFAULT_BUCKETS: readonly number[] = Object.freeze([0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5])

const complain = AdmissionOptionError.complain
const SHAPE = {
  keys: ['registry', 'meter', 'prefix', 'registration', 'buckets'],
  expected: 'an object { registry or meter, prefix?, registration?, buckets? }',
  nullPrototype: true,
  options: true
}
// Prometheus' metric name grammar; the prefix is the start of one.
const PREFIX = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/
// OpenTelemetry's instrument name grammar (an ASCII letter, then letters, digits, `_ . - /`, at
// most 255 characters in all); the prefix is the start of one, the longest name's end included.
const OTEL_PREFIX = /^[a-zA-Z][a-zA-Z0-9_./-]*$/
const OTEL_NAME_LENGTH = 255

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
  const { registry, meter } = input
  if (registry !== undefined && meter !== undefined) {
    throw new AdmissionOptionError('metrics', 'either `registry` (prom-client) or `meter` (OpenTelemetry), not both (to scrape an OpenTelemetry Meter, give it OpenTelemetry\'s Prometheus exporter)',
      value, { got: 'both' })
  }
  if (registry === undefined && meter === undefined) {
    throw new AdmissionOptionError('metrics', "an object with a prom-client `registry` (prom-client's `register`, or `new Registry()`) or an OpenTelemetry `meter` (`metrics.getMeter('my-app')`)",
      value, { got: 'neither' })
  }
  const registration = input.registration
  if (registration !== undefined && (typeof registration !== 'string' || registration.length === 0 || registration.length > 128)) {
    throw new AdmissionOptionError('metrics.registration', 'a string of 1 to 128 characters', registration)
  }
  const buckets = bucketsOption(input.buckets)
  if (meter !== undefined) return Object.freeze({ meter: meterOption(meter), prefix: otelPrefixOption(input.prefix), registration, buckets })
  if (!isRegistry(registry)) {
    throw new AdmissionOptionError('metrics.registry', "a prom-client Registry (prom-client's `register`, or `new Registry()`)", registry)
  }
  const prefix = input.prefix === undefined ? DEFAULT_PREFIX : input.prefix
  if (typeof prefix !== 'string' || !PREFIX.test(prefix)) {
    throw new AdmissionOptionError('metrics.prefix', 'the start of a Prometheus metric name (letters, digits, `_` and `:`, not starting with a digit)', prefix)
  }
  return Object.freeze({ registry, prefix, registration, buckets })
}

function meterOption (meter: unknown): MetricsMeter {
  const expected = "an OpenTelemetry Meter (`metrics.getMeter('my-app')` of @opentelemetry/api, or a MeterProvider's `getMeter()`)"
  if (typeof meter !== 'object' || meter === null) throw new AdmissionOptionError('metrics.meter', expected, meter)
  const missing = missingMeterMethod(meter)
  if (missing !== undefined) throw new AdmissionOptionError('metrics.meter', expected, meter, { got: `an object without ${missing}()` })
  return meter as MetricsMeter
}

function otelPrefixOption (value: unknown): string {
  if (value === undefined) return DEFAULT_OTEL_PREFIX
  const room = OTEL_NAME_LENGTH - LONGEST_INSTRUMENT_NAME
  if (typeof value !== 'string' || !OTEL_PREFIX.test(value) || value.length > room) {
    throw new AdmissionOptionError('metrics.prefix',
      `the start of an OpenTelemetry instrument name (an ASCII letter, then letters, digits, \`_\`, \`.\`, \`-\` and \`/\`; at most ${room} characters)`, value)
  }
  return value
}
