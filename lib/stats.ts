/** Counters kept in the hooks, for the whole gate and for each route. */
export interface GateCounters {
  /** Requests let through both gates. */
  admitted: number
  /** Requests refused by a rate limit. */
  limited: number
  /** Requests refused by an in-flight gate, or because no bucket could be had for a new client. */
  shed: number
  /** Requests holding a slot of this gate right now. */
  inFlight: number
}

export interface AdmissionStats extends GateCounters {
  /** Clients with a live bucket, over all limiters of this registration. */
  identities: number
  /** Counters per route, keyed `METHOD /url`; requests that matched no route count under `404`. */
  routes: Record<string, GateCounters>
}

export function newCounters (): GateCounters {
  return { admitted: 0, limited: 0, shed: 0, inFlight: 0 }
}

export function copyCounters (counters: GateCounters): GateCounters {
  return { admitted: counters.admitted, limited: counters.limited, shed: counters.shed, inFlight: counters.inFlight }
}
