import type { FastifyInstance } from 'fastify'
import { AdmissionOptionError } from '../validation/errors.js'
import { DecisionTimer } from './decision-timer.js'
import { Contained } from '../callbacks/contained.js'
import type { MetricsSettings } from './options.js'
import { reportToMeter } from './opentelemetry.js'
import { report } from './prometheus.js'
import type { MetricsSource, Reporting } from './source.js'

type PromClient = Parameters<typeof report>[0]

/**
 * prom-client, loaded only by a registration that asked for metrics (an optional peer: an app
 * without metrics needs not install it). Not installed, or not prom-client's shape: a typed
 * error at registration, saying what to do.
 */
export function loadPromClient (importer: () => Promise<unknown>): Promise<PromClient> {
  // Plain functions returning promises, not `async` ones: coverage merges them across processes.
  return importer().then(checkedPromClient, (error: unknown) => {
    throw new AdmissionOptionError('metrics', 'an option whose peer dependency prom-client is installed (npm install prom-client)', 'prom-client',
      { got: `prom-client could not be loaded (${error instanceof Error ? error.message : String(error)})` })
  })
}

/** The optional peer, by dynamic import (a `require` in the CommonJS build). */
export function importPromClient (): Promise<unknown> {
  return import('prom-client')
}

// ESM sees prom-client's CommonJS exports as named exports, and as `default`.
function checkedPromClient (loaded: unknown): PromClient {
  if (isPromClient(loaded)) return loaded
  const fallback = (loaded as { default?: unknown } | null)?.default
  if (isPromClient(fallback)) return fallback
  throw new AdmissionOptionError('metrics', 'an option whose peer dependency prom-client (15 or later) is installed', 'prom-client',
    { got: 'a prom-client module without Counter, Gauge and Histogram' })
}

function isPromClient (value: unknown): value is PromClient {
  const candidate = value as Partial<PromClient> | null
  return typeof candidate === 'object' && candidate !== null &&
    typeof candidate.Counter === 'function' && typeof candidate.Gauge === 'function' && typeof candidate.Histogram === 'function'
}

/**
 * A registration's metrics: the decision timer is there from the start (the quotas are made
 * with it); the reporting starts before the registration ends — through the app's Meter at once
 * (nothing to load), or once prom-client is loaded (a promise).
 */
export class AdmissionMetrics {
  readonly timer = new DecisionTimer()
  private readonly settings: MetricsSettings

  constructor (settings: MetricsSettings) {
    this.settings = settings
  }

  start (fastify: FastifyInstance, gates: Omit<MetricsSource, 'registration'>, address: string): Promise<void> | undefined {
    const settings = this.settings
    const source = { ...gates, registration: settings.registration ?? address }
    if (settings.meter !== undefined) {
      this.started(fastify, reportToMeter(settings, source))
      return undefined
    }
    return loadPromClient(importPromClient).then((prom) => { this.started(fastify, report(prom, settings, source)) })
  }

  private started (fastify: FastifyInstance, reporting: Reporting): void {
    // A histogram (or an SDK behind a Meter) that throws is logged once until it records again;
    // the decision it was timing stands.
    const recording = new Contained(fastify.log, 'the decision duration histogram (metrics)', undefined, 'the decision stands, unrecorded')
    const observe = reporting.observe
    this.timer.observe = (seconds) => { recording.notify(observe, seconds) }
    // The app's close takes its series off the registry, its callbacks off the Meter.
    fastify.addHook('onClose', reporting.stop)
  }
}
