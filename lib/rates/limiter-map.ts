import type { Policy } from '../core/rates/types.js'
import { RatesPolicyConflictError } from './errors.js'
import { samePolicy } from './policy.js'

/**
 * A backend's limiters by address. An address keeps the policy it was opened with: opening it
 * again with another policy is a conflict, never a silent change of quota.
 */
export class LimiterMap<L extends { readonly policy: Readonly<Policy> }> extends Map<string, L> {
  open (address: string, policy: Readonly<Policy>, create: () => L): L {
    const existing = this.get(address)
    if (existing !== undefined) {
      if (!samePolicy(existing.policy, policy)) throw new RatesPolicyConflictError(address, existing.policy, policy)
      return existing
    }
    const limiter = create()
    this.set(address, limiter)
    return limiter
  }
}
