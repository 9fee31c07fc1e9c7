import type { GateCounters } from '../metrics/counters.js'
import type { LimitSample } from './history.js'

/** Refusals by reason — which step refused: `in-flight`, `quota:default`, `pressure:eventLoopDelay`… — as `stats()` counts them. */
export type ReasonCounts = Readonly<Record<string, number>>

/** A client refused often over the last minute, by its key as `stats()` tells it (a digest unless raw keys were asked for). */
export interface Offender {
  readonly key: string
  readonly refused: number
}

/** What the page reads of `app.admission.stats()`; `offenders` unless they are off (`offenders: false`). */
export interface LiveStats extends GateCounters {
  readonly limit: number | false
  readonly routes: Readonly<Record<string, GateCounters & { readonly reasons: ReasonCounts }>>
  readonly reasons: ReasonCounts
  readonly offenders?: readonly Offender[]
}

/** A route's counters on the page: cumulative since registration (the page's rates are their differences over time). */
export interface LiveRoute {
  readonly admitted: number
  readonly limited: number
  readonly shed: number
  readonly unavailable: number
  readonly inFlight: number
  readonly reasons: ReasonCounts
}

/** The JSON of `<path>/data`: one snapshot of the gate; the page polls it every second. */
export interface LiveSnapshot extends LiveRoute {
  /** When it was taken, ms since the epoch (the page divides counter differences by its differences). */
  readonly time: number
  /** The global in-flight limit now, null without one. */
  readonly limit: number | null
  /** Per route, by `METHOD /url` as in `stats().routes` (`404` for requests that matched no route). */
  readonly routes: Readonly<Record<string, LiveRoute>>
  /** The limit and the requests in flight, sampled each second over the last minute, oldest first. */
  readonly history: readonly LimitSample[]
  /** The clients refused most over the last minute; null with `offenders: false`. */
  readonly offenders: readonly Offender[] | null
}

// The counters the page shows; the others (`allowed`, `wouldLimit`…) stay in `stats()`.
function route ({ admitted, limited, shed, unavailable, inFlight, reasons }: GateCounters & { readonly reasons: ReasonCounts }): LiveRoute {
  return { admitted, limited, shed, unavailable, inFlight, reasons }
}

/** The page's data: the counters it shows, copied out of `stats()`, and the limit's last minute. */
export function snapshotOf (stats: LiveStats, history: readonly LimitSample[], time: number): LiveSnapshot {
  const routes: Record<string, LiveRoute> = {}
  for (const [name, counters] of Object.entries(stats.routes)) routes[name] = route(counters)
  return {
    time,
    ...route(stats),
    limit: stats.limit === false ? null : stats.limit,
    routes,
    history,
    offenders: stats.offenders ?? null
  }
}
