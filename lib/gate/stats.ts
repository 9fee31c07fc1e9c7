import type { PressureCounts } from '../pressure/pressure.js'
import type { AttemptCounts, GateCounters } from '../metrics/counters.js'
export { copyCounters, newCounters, type AttemptCounts, type GateCounters } from '../metrics/counters.js'

export interface AdmissionStats extends GateCounters {
  /** The global in-flight limit now (the adaptive limit's current value), or `false` without one. */
  limit: number | false
  /**
   * States the memory backend holds in this process, over all its limiters (0 on Redis): one per
   * client and policy (a stack of two policies holds two), live or recovered — a recovered state
   * stays held until its client comes back, its room is needed for a new client at `maxIdentities`
   * (then every recovered one is dropped), or it is deleted. What the quotas' memory grows with.
   */
  identities: number
  /**
   * Refusals since registration by reason — which step refused: `in-flight`, `quota:default`,
   * `pressure:eventLoopDelay`… (docs/guides/metrics.md#reasons) — over every route; every reason the
   * routes' plans can refuse for is there, at 0 until one.
   */
  reasons: Record<string, number>
  /** Counters per route, keyed `METHOD /url`; requests that matched no route count under `404`. */
  routes: Record<string, RouteStats>
  /** With `pressure` or `queueDelay`: the requests shed by each signal (also in `shed`), and those given to `pressureHandler`. */
  pressure?: PressureCounts
  /**
   * With `offenders` (the default): the clients refused most for what they did (their quota, their
   * in-flight limit) over the last minute, most first, at most `offenders.top` (20). Each key is its
   * digest (the `pk` its client is sent, with `headers.partitionKey`) unless `offenders.rawKeys`.
   */
  offenders?: Offender[]
  /**
   * With `retries` (the default): admissions and sheds by attempt kind — `retries` for requests whose
   * attempt header said 2 or more, `first` for the rest of `admitted` and `shed`.
   */
  attempts?: { first: AttemptCounts, retries: AttemptCounts }
}

/** A client among the top offenders. */
export interface Offender {
  /** Its key's digest (`:…:`, as `pk`), or the key itself with `offenders.rawKeys`. */
  key: string
  /** Its refusals over the last minute: exact for a client the sketch held all along, at least this many otherwise. */
  refused: number
}

/** A route's counters, and how long its oldest in-flight permit has been held. */
export interface RouteStats extends GateCounters {
  /** Ms since the request holding the route's oldest in-flight permit arrived; 0 when none is held. */
  oldestPermitMs: number
  /** The route's refusals by reason, as `AdmissionStats.reasons`. */
  reasons: Record<string, number>
}
