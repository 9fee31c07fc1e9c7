import { attemptsOf, type CountedGate, type GateCounters, type RetryCounters } from './counters.js'
import type { AdmissionOutcome } from './events.js'

/** What one registration reports: the gate's own counters, read when the metrics are collected. */
export interface MetricsSource {
  /** The `registration` label (attribute). */
  readonly registration: string
  readonly global: GateCounters
  readonly gates: () => Iterable<CountedGate>
  /** The global in-flight limit now, 0 for none (an adaptive limit moves: read at each collection). */
  readonly limit: () => number
  /** `onBackendError: 'allow'`: a request the backend could not decide for is admitted, not refused. */
  readonly admitsOnBackendError: boolean
  /** With `retries` on: the requests that said they were retries, by outcome. */
  readonly retries: RetryCounters | undefined
}

/** A registration's reporting: where its backend decision latencies go, and what stops it (at the app's close). */
export interface Reporting {
  readonly observe: (seconds: number) => void
  /** Async: Fastify takes it as an `onClose` hook as it is. */
  readonly stop: () => Promise<void>
}

export const OUTCOMES: readonly AdmissionOutcome[] = Object.freeze(['admitted', 'limited', 'shed', 'unavailable'])

/**
 * A gate's requests with `outcome`. With `onBackendError: 'allow'` the requests the backend could
 * not decide for were admitted (and counted so): `unavailable` is 0, and the outcomes stay a partition.
 */
export function outcomeCount (source: MetricsSource, counters: GateCounters, outcome: AdmissionOutcome): number {
  return outcome === 'unavailable' && source.admitsOnBackendError ? 0 : counters[outcome]
}

/**
 * In flight: with a global limit, the count it is held to; without one the gate keeps no global
 * count, and the routes' counts add up to the same number (every permit is a route's).
 */
export function heldBy (source: MetricsSource): number {
  if (source.limit() !== 0) return source.global.inFlight
  let held = 0
  for (const gate of source.gates()) held += gate.counters.inFlight
  return held
}

/** An attempt kind and an outcome, and the registration's requests of both (with `retries` on; none without). */
export interface AttemptSeries {
  readonly attempt: 'first' | 'retry'
  readonly outcome: 'admitted' | 'shed'
  readonly count: number
}

export function attemptSeries (source: MetricsSource): AttemptSeries[] {
  if (source.retries === undefined) return []
  const { first, retries } = attemptsOf(source.global, source.retries)
  return [
    { attempt: 'first', outcome: 'admitted', count: first.admitted },
    { attempt: 'first', outcome: 'shed', count: first.shed },
    { attempt: 'retry', outcome: 'admitted', count: retries.admitted },
    { attempt: 'retry', outcome: 'shed', count: retries.shed }
  ]
}
