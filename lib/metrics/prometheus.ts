import type * as Prom from 'prom-client'
import { AdmissionOptionError } from '../validation/errors.js'
import type { CountedGate } from './counters.js'
import type { MetricsRegistry, PrometheusSettings } from './options.js'
import { joinSet, type SharedSet } from './shared-set.js'
import { attemptSeries, heldBy, OUTCOMES, outcomeCount, type MetricsSource, type Reporting } from './source.js'

type PromClient = Pick<typeof Prom, 'Counter' | 'Gauge' | 'Histogram'>
type Put = (labels: Record<string, string>, value: number) => void
/** What a counter and a gauge both do. */
interface Rebuilt { reset (): void, inc (labels: Record<string, string>, value: number): void }

/** Metric names after the prefix, as docs/guides/metrics.md lists them. */
export const METRIC_NAMES = Object.freeze({
  requests: 'requests_total',
  refusals: 'refusals_total',
  attempts: 'attempts_total',
  inFlight: 'in_flight_requests',
  inFlightLimit: 'in_flight_limit_requests',
  routeInFlight: 'route_in_flight_requests',
  routeInFlightLimit: 'route_in_flight_limit_requests',
  backendErrors: 'backend_errors_total',
  decisionDuration: 'backend_decision_duration_seconds'
})

/**
 * The package's metrics on one registry under one prefix, shared by every registration that
 * reports there (each its own `registration` label): prom-client allows one metric per name on
 * a registry. Counters and gauges hold nothing between scrapes — each `collect()` rebuilds them
 * from the gates' counters, which the hooks keep anyway — so metrics add no work per request;
 * only the histogram is fed as decisions happen (see `DecisionTimer`).
 */
class MetricSet implements SharedSet {
  readonly sources = new Map<string, MetricsSource>()
  readonly histogram: Prom.Histogram<'registration'>
  readonly buckets: readonly number[]
  private readonly names: string[]
  private readonly registry: MetricsRegistry

  constructor (prom: PromClient, registry: MetricsRegistry, prefix: string, buckets: readonly number[]) {
    this.registry = registry
    this.buckets = buckets
    this.names = Object.values(METRIC_NAMES).map((name) => prefix + name)
    for (const name of this.names) {
      if (registry.getSingleMetric(name) !== undefined) {
        throw new AdmissionOptionError('metrics.prefix', `a prefix whose names are free on this registry (\`${name}\` is registered there by something else)`, prefix)
      }
    }
    const registers = [registry as unknown as Prom.Registry]
    const sources = this.sources
    const each = (visit: (source: MetricsSource, gate: CountedGate) => void): void => {
      for (const source of sources.values()) for (const gate of source.gates()) visit(source, gate)
    }
    /** A counter or a gauge rebuilt at each scrape: `fill` puts the current value of each series. */
    const scraped = (Kind: typeof prom.Counter | typeof prom.Gauge, name: string, help: string, labelNames: string[], fill: (put: Put) => void): void => {
      // A gauge reset has no series either, so `inc` from nothing is a `set` for both kinds.
      const metric: Rebuilt = new Kind({ name: prefix + name, help, labelNames, registers, collect: () => { metric.reset(); fill(metric.inc.bind(metric)) } })
    }
    const ROUTE = ['registration', 'route']
    scraped(prom.Counter, METRIC_NAMES.requests, 'Requests the gate decided on, by route and outcome (admitted, limited, shed, unavailable: refused because the backend could not decide).',
      [...ROUTE, 'outcome'], (put) => {
        each((source, gate) => {
          for (const outcome of OUTCOMES) put({ registration: source.registration, route: gate.name, outcome }, outcomeCount(source, gate.counters, outcome))
        })
      })
    scraped(prom.Counter, METRIC_NAMES.refusals, 'Requests the gate refused, by route and reason: which step refused (in-flight, quota:<policy>, pressure:<signal>…; every reason the route can refuse for, from 0).',
      [...ROUTE, 'reason'], (put) => {
        each((source, gate) => {
          for (const [reason, count] of gate.reasons) put({ registration: source.registration, route: gate.name, reason }, count)
        })
      })
    scraped(prom.Counter, METRIC_NAMES.attempts, 'Requests admitted and shed by attempt (first, or a retry: Retry-Attempt 2 and up), per registration with retries on.',
      ['registration', 'attempt', 'outcome'], (put) => {
        for (const source of sources.values()) {
          for (const { attempt, outcome, count } of attemptSeries(source)) put({ registration: source.registration, attempt, outcome }, count)
        }
      })
    scraped(prom.Gauge, METRIC_NAMES.inFlight, 'Requests holding an in-flight permit of the registration.', ['registration'], (put) => {
      for (const source of sources.values()) put({ registration: source.registration }, heldBy(source))
    })
    scraped(prom.Gauge, METRIC_NAMES.inFlightLimit, 'The registration\'s in-flight limit now: maxInFlight, or the adaptive limit (absent when it sheds nothing).', ['registration'], (put) => {
      for (const source of sources.values()) {
        const limit = source.limit()
        if (limit !== 0) put({ registration: source.registration }, limit)
      }
    })
    scraped(prom.Gauge, METRIC_NAMES.routeInFlight, 'Requests of the route holding an in-flight permit.', ROUTE, (put) => {
      each((source, gate) => { put({ registration: source.registration, route: gate.name }, gate.counters.inFlight) })
    })
    scraped(prom.Gauge, METRIC_NAMES.routeInFlightLimit, 'The route\'s own maxInFlight (routes that have one).', ROUTE, (put) => {
      each((source, gate) => { if (gate.maxInFlight !== 0) put({ registration: source.registration, route: gate.name }, gate.maxInFlight) })
    })
    scraped(prom.Counter, METRIC_NAMES.backendErrors,
      'Rate-limit decisions the backend could not make (down, slow, conflicting policy, memory full of live state), by route; each answered by onBackendError.', ROUTE, (put) => {
        each((source, gate) => { if (gate.limiter !== undefined) put({ registration: source.registration, route: gate.name }, gate.counters.unavailable) })
      })
    this.histogram = new prom.Histogram({
      name: prefix + METRIC_NAMES.decisionDuration,
      help: 'Time from asking the rate-limit backend to its answer or failure, for backends that decide by round trip (Redis; memory decides synchronously and is not timed).',
      labelNames: ['registration'],
      buckets: [...buckets],
      registers
    })
  }

  reports (registration: string): boolean {
    return this.sources.has(registration)
  }

  /** Takes the metrics off the registry (the last registration reporting there closed). */
  remove (): void {
    for (const name of this.names) this.registry.removeSingleMetric(name)
  }
}

// Per registry, per prefix. A WeakMap: a registry the app drops takes its sets with it.
const sets = new WeakMap<MetricsRegistry, Map<string, MetricSet>>()

/**
 * Reports `source` to the registry of `settings`: creates the package's metrics there (the first
 * registration) or joins them. Returns the function that stops reporting (at the app's close).
 * Refused, with a typed error: a label another live registration already reports under, buckets
 * other than those the metrics were made with, names taken by something else.
 */
export function report (prom: PromClient, settings: PrometheusSettings, source: MetricsSource): Reporting {
  const registry = settings.registry
  const { set: joined, byPrefix } = joinSet(sets, registry, 'registry', settings, source.registration, () => new MetricSet(prom, registry, settings.prefix, settings.buckets))
  joined.sources.set(source.registration, source)
  const labels = { registration: source.registration }
  return {
    observe: (seconds) => { joined.histogram.observe(labels, seconds) },
    stop: async () => {
      joined.sources.delete(source.registration)
      // The histogram's samples of a closed registration go with it.
      joined.histogram.remove(labels)
      if (joined.sources.size === 0) {
        joined.remove()
        byPrefix.delete(settings.prefix)
      }
    }
  }
}
