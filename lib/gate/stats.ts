import type { PressureCounts } from '../pressure/pressure.js'
import type { GateCounters } from '../metrics/counters.js'
export { copyCounters, newCounters, type GateCounters } from '../metrics/counters.js'

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
