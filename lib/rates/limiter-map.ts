import type { Policy } from '../core/rates/types.js'
import { RatesPolicyConflictError } from './errors.js'
import { samePolicy } from './policy.js'

/** Whether two stacks hold the same policies in the same order. */
export function sameStack (a: readonly Policy[], b: readonly Policy[]): boolean {
  return a.length === b.length && a.every((policy, i) => samePolicy(policy, b[i]!))
}

type Limiter = { readonly policy: Readonly<Policy> }
type Stack = { readonly policies: readonly Readonly<Policy>[] }

/**
 * A backend's quotas by address: limiters (one policy) and stacks (a list). An address names one
 * quota and keeps the policy it was opened with: opening it again with another policy, another
 * list, or a list where a single policy is (or the reverse) is a conflict, never a silent change of
 * quota nor a second quota beside it.
 */
export class QuotaMap<L extends Limiter, S extends Stack> {
  private readonly quotas = new Map<string, L | S>()

  limiter (address: string, policy: Readonly<Policy>, create: () => L): L {
    const existing = this.quotas.get(address)
    if (existing === undefined) return this.put(address, create())
    if (!isStack(existing) && samePolicy(existing.policy, policy)) return existing
    throw new RatesPolicyConflictError(address, isStack(existing) ? existing.policies : existing.policy, policy)
  }

  stack (address: string, policies: readonly Readonly<Policy>[], create: () => S): S {
    const existing = this.quotas.get(address)
    if (existing === undefined) return this.put(address, create())
    if (isStack(existing) && sameStack(existing.policies, policies)) return existing
    throw new RatesPolicyConflictError(address, isStack(existing) ? existing.policies : existing.policy, policies)
  }

  /** The addresses that have a quota. */
  addresses (): IterableIterator<string> {
    return this.quotas.keys()
  }

  values (): IterableIterator<L | S> {
    return this.quotas.values()
  }

  clear (): void {
    this.quotas.clear()
  }

  private put<Q extends L | S> (address: string, quota: Q): Q {
    this.quotas.set(address, quota)
    return quota
  }
}

/** A stack, told from a limiter by its list of policies. */
export function isStack<L extends Limiter, S extends Stack> (quota: L | S): quota is S {
  return (quota as Partial<Stack>).policies !== undefined
}
