import type { MemoryLimiter } from '../backends/memory/memory-limiter.js'
import type { BackendLimiter } from '../rates/backend.js'
import type { GateCounters } from './stats.js'

/** What a registration knows of one route (or of the requests that matched none). */
export interface RouteGate {
  readonly name: string
  readonly counters: GateCounters
  /** The route's own semaphore, or 0 for none. */
  readonly maxInFlight: number
  /** The client's quota on the memory backend: decided synchronously, on the request's path. */
  readonly local: MemoryLimiter | undefined
  /** The client's quota on another backend (Redis): one round trip. */
  readonly remote: BackendLimiter | undefined
  /** The `RateLimit-Policy` value, or undefined when headers are off or there is no limit. */
  readonly policyHeader: string | undefined
  readonly cost: number
  /** The route has a handler timeout: its slot waits for the handler, not for the response. */
  readonly waitsForHandler: boolean
}
