import type { CountedGate } from './counters.js'
import { ATTRIBUTES, INSTRUMENT_NAMES } from './instrument-names.js'
import type { MeterAttributes, MeterBatchCallback, MeterHistogram, MeterObservable, MetricsMeter } from './meter.js'
import type { OpenTelemetrySettings } from './options.js'
import { joinSet, type SharedSet } from './shared-set.js'
import { attemptSeries, heldBy, OUTCOMES, outcomeCount, type MetricsSource, type Reporting } from './source.js'

const REQUEST = '{request}'

/**
 * The package's instruments on one Meter under one prefix, made once and kept for the Meter's
 * life: OpenTelemetry cannot take an instrument back, and a Meter asked again for a name reports
 * into the first instrument's stream, its bucket boundaries included. All but the histogram are
 * observable: each registration reporting there observes them in a batch callback of its own
 * (its own `registration` attribute), which reads the gates' counters when the SDK collects —
 * no work per request — and is detached at its app's close.
 */
class InstrumentSet implements SharedSet {
  readonly registrations = new Set<string>()
  readonly buckets: readonly number[]
  readonly requests: MeterObservable
  readonly refusals: MeterObservable
  readonly attempts: MeterObservable
  readonly activeRequests: MeterObservable
  readonly inFlightLimit: MeterObservable
  readonly routeActiveRequests: MeterObservable
  readonly routeInFlightLimit: MeterObservable
  readonly backendErrors: MeterObservable
  /** Every observable instrument: what each registration's callback observes. */
  readonly observables: MeterObservable[]
  readonly duration: MeterHistogram

  constructor (meter: MetricsMeter, prefix: string, buckets: readonly number[]) {
    this.buckets = buckets
    const names = INSTRUMENT_NAMES
    this.requests = meter.createObservableCounter(prefix + names.requests, {
      unit: REQUEST,
      description: 'Requests the gate decided on, by route, policy and outcome (admitted, limited, shed, unavailable: refused because the backend could not decide).'
    })
    this.refusals = meter.createObservableCounter(prefix + names.refusals, {
      unit: REQUEST,
      description: 'Requests the gate refused, by route and reason: which step refused (in-flight, quota:<policy>, pressure:<signal>…; every reason the route can refuse for, from 0).'
    })
    this.attempts = meter.createObservableCounter(prefix + names.attempts, {
      unit: REQUEST,
      description: 'Requests admitted and shed by attempt (first, or a retry: Retry-Attempt 2 and up), per registration with retries on.'
    })
    this.activeRequests = meter.createObservableUpDownCounter(prefix + names.activeRequests, { unit: REQUEST, description: 'Requests holding an in-flight permit of the registration.' })
    this.inFlightLimit = meter.createObservableGauge(prefix + names.inFlightLimit, {
      unit: REQUEST,
      description: 'The registration\'s in-flight limit now: maxInFlight, or the adaptive limit (absent when it sheds nothing).'
    })
    this.routeActiveRequests = meter.createObservableUpDownCounter(prefix + names.routeActiveRequests, { unit: REQUEST, description: 'Requests of the route holding an in-flight permit.' })
    this.routeInFlightLimit = meter.createObservableGauge(prefix + names.routeInFlightLimit, { unit: REQUEST, description: 'The route\'s own maxInFlight (routes that have one).' })
    this.backendErrors = meter.createObservableCounter(prefix + names.backendErrors, {
      unit: '{error}',
      description: 'Rate-limit decisions the backend could not make (down, slow, conflicting policy, memory full of live state), by route; each answered by onBackendError.'
    })
    this.observables = [this.requests, this.refusals, this.attempts, this.activeRequests, this.inFlightLimit, this.routeActiveRequests, this.routeInFlightLimit, this.backendErrors]
    this.duration = meter.createHistogram(prefix + names.decisionDuration, {
      unit: 's',
      description: 'Time from asking the rate-limit backend to its answer or failure, for backends that decide by round trip (Redis; memory decides synchronously and is not timed).',
      advice: { explicitBucketBoundaries: [...buckets] }
    })
  }

  reports (registration: string): boolean {
    return this.registrations.has(registration)
  }
}

/** A gate's attributes: its route (and template), and for the requests and errors its policies. Never a client's key. */
function routeAttributes (registration: string, gate: CountedGate): MeterAttributes {
  const attributes: MeterAttributes = { [ATTRIBUTES.registration]: registration, [ATTRIBUTES.route]: gate.name }
  if (gate.url !== undefined) attributes[ATTRIBUTES.httpRoute] = gate.url
  return attributes
}

/** The callback that observes one registration's gates. */
function observer (set: InstrumentSet, source: MetricsSource): MeterBatchCallback {
  const registration = { [ATTRIBUTES.registration]: source.registration }
  return (result) => {
    result.observe(set.activeRequests, heldBy(source), registration)
    for (const { attempt, outcome, count } of attemptSeries(source)) result.observe(set.attempts, count, { ...registration, [ATTRIBUTES.attempt]: attempt, [ATTRIBUTES.outcome]: outcome })
    const limit = source.limit()
    if (limit !== 0) result.observe(set.inFlightLimit, limit, registration)
    for (const gate of source.gates()) {
      const counters = gate.counters
      const route = routeAttributes(source.registration, gate)
      // A stack's or a tiered route's several policies, in their declared order: one value per gate.
      const policy = gate.policyNames.length === 0 ? route : { ...route, [ATTRIBUTES.policy]: gate.policyNames.join(',') }
      for (const outcome of OUTCOMES) result.observe(set.requests, outcomeCount(source, counters, outcome), { ...policy, [ATTRIBUTES.outcome]: outcome })
      for (const [reason, count] of gate.reasons) result.observe(set.refusals, count, { ...route, [ATTRIBUTES.reason]: reason })
      result.observe(set.routeActiveRequests, counters.inFlight, route)
      if (gate.maxInFlight !== 0) result.observe(set.routeInFlightLimit, gate.maxInFlight, route)
      if (gate.limiter !== undefined) result.observe(set.backendErrors, counters.unavailable, policy)
    }
  }
}

// Per Meter, per prefix. A WeakMap: a Meter the app drops takes its sets with it.
const sets = new WeakMap<MetricsMeter, Map<string, InstrumentSet>>()

/**
 * Reports `source` through the Meter of `settings`: makes the package's instruments there (the
 * first registration) or joins them. Refused, with a typed error: a `registration` another live
 * registration on this Meter and prefix already reports under, buckets other than those its
 * histogram was made with.
 */
export function reportToMeter (settings: OpenTelemetrySettings, source: MetricsSource): Reporting {
  const meter = settings.meter
  const { set } = joinSet(sets, meter, 'Meter', settings, source.registration, () => new InstrumentSet(meter, settings.prefix, settings.buckets))
  set.registrations.add(source.registration)
  const callback = observer(set, source)
  meter.addBatchObservableCallback(callback, set.observables)
  const registration = { [ATTRIBUTES.registration]: source.registration }
  return {
    observe: (seconds) => { set.duration.record(seconds, registration) },
    stop: async () => {
      meter.removeBatchObservableCallback(callback, set.observables)
      set.registrations.delete(source.registration)
    }
  }
}
