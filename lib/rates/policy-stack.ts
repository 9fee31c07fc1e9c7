import type { Policy } from '../core/rates/types.js'
import { exactList } from '../validation/checks.js'
import { RatesInvalidArgumentError } from './errors.js'
import { capacityOf, normalizePolicy, samePolicy } from './policy.js'

/** Policies in one stack at most: every call decides each of them. */
export const MAX_STACK_POLICIES = 8

const EXPECTED = `a list of 1 to ${MAX_STACK_POLICIES} policies`

/** Why a stack's policy has no penalty: a stack refuses as one, a penalty blocks one policy's client. */
export const PENALTY_ALONE = 'absent in a list of policies (a penalty is for a single policy: a stack refuses as one)'

/**
 * Copies, validates, normalizes and freezes a stack's policies: an exact array (as the toolkit's
 * `exactList` reads it) of 1 to 8 policies, each as `normalizePolicy()` has it, under `policies[i]`,
 * no two the same once normalized (a second copy could only repeat the first's decision and double
 * its cost in state). The order is kept: it is the order of every decision's `policies`, and part of
 * what the quota is (another order at the same name is a conflict).
 */
export function normalizePolicies (input: unknown, path = 'policies'): readonly Readonly<Policy>[] {
  const complain = RatesInvalidArgumentError.complain
  const items = exactList(complain, path, input, EXPECTED, MAX_STACK_POLICIES)
  if (items.length === 0) throw complain({ path, expected: EXPECTED, value: input, got: 'an empty list' })
  const policies = items.map((item, i) => normalizePolicy(item, `${path}[${i}]`))
  policies.forEach((policy, i) => {
    if (policy.penalty !== undefined) throw complain({ path: `${path}[${i}].penalty`, expected: PENALTY_ALONE, value: policy.penalty.mode })
  })
  policies.forEach((policy, i) => {
    const twin = policies.findIndex((other) => samePolicy(other, policy))
    if (twin < i) throw complain({ path: `${path}[${i}]`, expected: `a policy unlike ${path}[${twin}] (a stack holds each policy once)`, value: items[i] })
  })
  return Object.freeze(policies)
}

/** The largest cost a stack takes: its smallest capacity (see `capacityOf()`). */
export function stackCapacity (policies: readonly Policy[]): number {
  return Math.min(...policies.map(capacityOf))
}
