import type { FastifyInstance } from 'fastify'
import { AdmissionOptionError } from '../gate/errors.js'
import { DecisionTimer } from './decision-timer.js'
import type { MetricsSettings } from './options.js'
import { report, type MetricsSource } from './prometheus.js'

type PromClient = Parameters<typeof report>[0]

/**
 * prom-client, loaded only by a registration that asked for metrics (an optional peer: an app
 * without metrics needs not install it). Not installed, or not prom-client's shape: a typed
 * error at registration, saying what to do.
 */
export async function loadPromClient (importer: () => Promise<unknown> = async () => await import('prom-client')): Promise<PromClient> {
  let loaded: unknown
  try {
    loaded = await importer()
  } catch (error) {
    throw new AdmissionOptionError('metrics', 'an option whose peer dependency prom-client is installed (npm install prom-client)', 'prom-client',
      { got: `prom-client could not be loaded (${error instanceof Error ? error.message : String(error)})` })
  }
  // ESM sees prom-client's CommonJS exports as named exports, and as `default`.
  const candidates = [loaded, (loaded as { default?: unknown } | null)?.default]
  const prom = candidates.find((c): c is PromClient => typeof c === 'object' && c !== null &&
    typeof (c as PromClient).Counter === 'function' && typeof (c as PromClient).Gauge === 'function' && typeof (c as PromClient).Histogram === 'function')
  if (prom === undefined) {
    throw new AdmissionOptionError('metrics', 'an option whose peer dependency prom-client (15 or later) is installed', 'prom-client',
      { got: 'a prom-client module without Counter, Gauge and Histogram' })
  }
  return prom
}

/**
 * A registration's metrics: the decision timer is there from the start (the quotas are made
 * with it), prom-client and the registry's metrics come at `start`, before the registration ends.
 */
export class AdmissionMetrics {
  readonly timer = new DecisionTimer()
  private readonly settings: MetricsSettings

  constructor (settings: MetricsSettings) {
    this.settings = settings
  }

  async start (fastify: FastifyInstance, source: Omit<MetricsSource, 'registration'>, address: string): Promise<void> {
    const prom = await loadPromClient()
    const reporting = report(prom, this.settings, { ...source, registration: this.settings.registration ?? address })
    this.timer.observe = reporting.observe
    fastify.addHook('onClose', (_instance, done) => { reporting.stop(); done() })
  }
}
