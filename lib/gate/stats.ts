import type { PressureCounts } from '../pressure/pressure.js'

/** Counters kept in the hooks, for the whole gate and for each route. */
export interface GateCounters {
  /** Requests let through both gates (with `enforce: false`, every request that reached the rate check). */
  admitted: number
  /** Requests refused by a rate limit. */
  limited: number
  /** Requests answered 503: a full in-flight gate, or a quota the backend could not decide. */
  shed: number
  /**
   * Decisions the backend could not make (Redis down or slow, memory full of live state); each
   * was shed, or admitted when `onBackendError: 'allow'` (or `enforce: false`) asks for it.
   */
  unavailable: number
  /** Requests holding a slot of this gate right now. */
  inFlight: number
  /** Requests the allow list let past the rate limit (and past shedding, with `allowListSkipsShedding`); counted in `admitted` too. */
  allowed: number
  /** `enforce: false`: requests a quota would have refused (admitted instead, and counted in `admitted`). */
  wouldLimit: number
  /** `enforce: false`: requests a full in-flight gate would have shed (let on, holding no permit). */
  wouldShed: number
}

export interface AdmissionStats extends GateCounters {
  /** The global in-flight limit now (the adaptive limit's current value), or `false` without one. */
  limit: number | false
  /** Identities with live state in this process's memory backend, over all its limiters (0 on Redis). */
  identities: number
  /** Counters per route, keyed `METHOD /url`; requests that matched no route count under `404`. */
  routes: Record<string, GateCounters>
  /** With `pressure` or `queueDelay`: the requests shed by each signal (also in `shed`), and those given to `pressureHandler`. */
  pressure?: PressureCounts
}

export function newCounters (): GateCounters {
  return { admitted: 0, limited: 0, shed: 0, unavailable: 0, inFlight: 0, allowed: 0, wouldLimit: 0, wouldShed: 0 }
}

export function copyCounters (counters: GateCounters): GateCounters {
  return {
    admitted: counters.admitted,
    limited: counters.limited,
    shed: counters.shed,
    unavailable: counters.unavailable,
    inFlight: counters.inFlight,
    allowed: counters.allowed,
    wouldLimit: counters.wouldLimit,
    wouldShed: counters.wouldShed
  }
}
