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

/** Whether two stacks hold the same policies in the same order. */
export function sameStack (a: readonly Policy[], b: readonly Policy[]): boolean {
  return a.length === b.length && a.every((policy, i) => samePolicy(policy, b[i]!))
}

/** A backend's stacks by address: as `LimiterMap`, for lists of policies. */
export class StackMap<S extends { readonly policies: readonly Readonly<Policy>[] }> extends Map<string, S> {
  open (address: string, policies: readonly Readonly<Policy>[], create: () => S): S {
    const existing = this.get(address)
    if (existing !== undefined) {
      if (!sameStack(existing.policies, policies)) throw new RatesPolicyConflictError(address, existing.policies, policies)
      return existing
    }
    const stack = create()
    this.set(address, stack)
    return stack
  }
}
