import type { Policy } from '../../core/rates/types.js'
import type { BackendLimiter, RatesBackend } from '../../rates/backend.js'
import { AdmissionOptionError } from '../errors.js'
import { isStack, isTiers, type Limits, type NamedPolicy, type StackLimits } from '../options/limits.js'
import { StackedQuota } from './stacked-quota.js'
import { part } from '../../rates/address.js'

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

  /**
   * The limiter of `route`'s quota (`*`: the shared one); undefined for no rate limit. A stack is
   * the backend's stack at the same address; so is a single policy whose requests only check
   * (`loginAttempts`, login throttling: a stack of one has the check a limiter lacks).
   */
  open (route: string, limits: Readonly<Policy> | StackLimits | false, loginAttempts = false, path = 'rateLimit'): BackendLimiter | undefined {
    if (limits === false) return undefined
    const address = this.start + part(route)
    if (!isStack(limits) && !loginAttempts) return checkedLimiter(this.backend.limiter(address, limits))
    const named: readonly NamedPolicy[] = isStack(limits) ? limits.policies : [{ name: 'default', policy: limits }]
    const backend = this.backend
    if (typeof backend.stack !== 'function') {
      const why = `the backend (kind ${JSON.stringify(backend.kind)}) has no stack(), which`
      if (loginAttempts) throw new AdmissionOptionError(path.replace(/rateLimit$/, 'count'), `'requests': ${why} count: 'failures' needs`, 'failures')
      throw new AdmissionOptionError(path, `a single policy: ${why} a list of policies needs`, named.map((p) => p.policy))
    }
    return new StackedQuota(backend.stack(address, named.map((p) => p.policy)), named, loginAttempts)
  }
}

/** The quotas of one `rateLimit` at a route: one limiter, or one per tier. */
export interface OpenedLimits {
  /** The quota (with tiers: the first tier's, so that a tiered route counts as limited). */
  readonly limiter: BackendLimiter | undefined
  readonly tiers: ReadonlyMap<string, BackendLimiter> | undefined
}

/** Opens `limits` at `route` (`route~<tier>` for each tier). */
export function openLimits (quotas: Quotas, route: string, limits: Limits | false, loginAttempts: boolean, path: string): OpenedLimits {
  if (limits === false || !isTiers(limits)) return { limiter: quotas.open(route, limits, loginAttempts, path), tiers: undefined }
  const tiers = new Map<string, BackendLimiter>()
  for (const [name, one] of limits.tiers) tiers.set(name, quotas.open(`${route}~${name}`, one, loginAttempts, `${path}.tiers.${name}`)!)
  return { limiter: tiers.values().next().value, tiers }
}

/** The policy that headers and logs name for limits: the policy, a stack's first, the first tier's. */
export function leadPolicy (limits: Limits | false): Readonly<Policy> | false {
  if (limits === false) return false
  if (isTiers(limits)) return leadPolicy(limits.tiers.values().next().value!)
  return isStack(limits) ? limits.policies[0]!.policy : limits
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
