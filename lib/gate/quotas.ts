import type { Policy } from '../core/rates/types.js'
import type { BackendLimiter, RatesBackend } from '../rates/backend.js'
import { AdmissionOptionError } from './errors.js'
import { part } from './registration-address.js'

/**
 * The gate's quotas on the backend, one per route that has its own policy and one shared: each
 * at `<registration address>#admission[@<version>]:<route>` — the same address language as the
 * rates capability's limiters, so both live side by side on one backend.
 */
export class Quotas {
  private readonly backend: RatesBackend
  private readonly start: string

  constructor (backend: RatesBackend, registration: string, version: string | undefined) {
    this.backend = backend
    this.start = `${registration}#admission${version === undefined ? '' : `@${part(version)}`}:`
  }

  /** The limiter of `route`'s quota (`*`: the shared one); undefined for no rate limit. */
  open (route: string, policy: Readonly<Policy> | false): BackendLimiter | undefined {
    if (policy === false) return undefined
    return checkedLimiter(this.backend.limiter(this.start + part(route), policy))
  }
}

/** A custom backend is taken at its word only once its limiter has the contract's shape. */
function checkedLimiter (limiter: unknown): BackendLimiter {
  const candidate = limiter as Partial<Record<keyof BackendLimiter, unknown>> | null
  const ok = typeof candidate === 'object' && candidate !== null &&
    typeof candidate.consume === 'function' && typeof candidate.state === 'function' && typeof candidate.delete === 'function' &&
    (candidate.synchronous === undefined || (typeof candidate.synchronous === 'object' && candidate.synchronous !== null &&
      typeof (candidate.synchronous as { decide?: unknown }).decide === 'function'))
  if (!ok) throw new AdmissionOptionError('backend', 'a backend whose limiter() returns { consume(), state(), delete(), synchronous? }', limiter)
  return limiter as BackendLimiter
}
