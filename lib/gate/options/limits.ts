import type { FastifyRequest } from 'fastify'
import type { Policy } from '../../core/rates/types.js'
import { normalizePolicy, samePolicy } from '../../rates/policy.js'
import { MAX_STACK_POLICIES, PENALTY_ALONE, stackCapacity } from '../../rates/policy-stack.js'
import { exactList, exactObject, memberPath } from '../../validation/checks.js'
import { AdmissionOptionError } from '../errors.js'
import { quotaOf } from '../../rates/policy.js'

/**
 * What a `rateLimit` option holds once checked: one policy, a stack of policies decided as one
 * (all or nothing: `[{ limit: 10, windowMs: 1000 }, { limit: 10_000, windowMs: 86_400_000 }]`),
 * or tiers — several of those declared up front, one picked per request by a synchronous
 * `tier(request)` (never a policy built per request).
 */
export type Limits = Readonly<Policy> | StackLimits | TierLimits

/** A policy of a stack with the name the `RateLimit` headers list it under. */
export interface NamedPolicy {
  readonly name: string
  readonly policy: Readonly<Policy>
}

export interface StackLimits {
  readonly kind: 'stack'
  readonly policies: readonly NamedPolicy[]
}

export interface TierLimits {
  readonly kind: 'tiers'
  /** Each tier's limits (one policy or a stack), by name, in the order declared. */
  readonly tiers: ReadonlyMap<string, Readonly<Policy> | StackLimits>
  readonly tier: (request: FastifyRequest) => string
}

export function isStack (limits: Limits): limits is StackLimits {
  return (limits as StackLimits).kind === 'stack'
}

export function isTiers (limits: Limits): limits is TierLimits {
  return (limits as TierLimits).kind === 'tiers'
}

const MAX_TIERS = 32
// A draft-10 list member's key (RFC 8941 sf-key): the name in `RateLimit-Policy` and `RateLimit`.
const NAME = /^[a-z][a-z0-9_.-]{0,63}$/
const NAME_TEXT = 'a name of 1 to 64 characters: a lowercase letter, then lowercase letters, digits, `_`, `-` or `.` (a key of the RateLimit headers)'

const complain = AdmissionOptionError.complain
const NAMED_POLICY_SHAPE = { keys: ['algorithm', 'limit', 'windowMs', 'burst', 'penalty', 'name'], expected: 'a plain object { algorithm, limit, windowMs, burst?, name? }' }
const TIER_SHAPE = { keys: ['tiers', 'tier'], expected: 'an object { tiers, tier }', nullPrototype: true }

/**
 * A `rateLimit` option: a policy (`{ limit, windowMs, algorithm?, burst? }`), a list of them (a
 * stack, each optionally `name`d), or `{ tiers: { name: policy or list, ... }, tier(request) }`.
 */
export function limitsOption (path: string, value: unknown): Limits {
  if (Array.isArray(value)) return stackOption(path, value, '')
  if (typeof value === 'object' && value !== null && Object.prototype.hasOwnProperty.call(value, 'tiers')) return tiersOption(path, value)
  return normalizePolicy(value, path, { algorithm: 'token-bucket' }, complain)
}

const STACK_TEXT = `a list of 1 to ${MAX_STACK_POLICIES} policies (a stack: a request passes only when every one has room)`

function stackOption (path: string, input: unknown, tier: string): StackLimits | Readonly<Policy> {
  // Read as the rates capability reads its lists: an exact array, no holes, no getters.
  const list = exactList(complain, path, input, STACK_TEXT, MAX_STACK_POLICIES)
  if (list.length === 0) throw new AdmissionOptionError(path, STACK_TEXT, input, { got: 'an empty list' })
  const policies: NamedPolicy[] = []
  for (let i = 0; i < list.length; i++) {
    const at = `${path}[${i}]`
    const item = list[i]
    let name: unknown
    let policyInput: unknown = item
    if (typeof item === 'object' && item !== null && !Array.isArray(item) && Object.prototype.hasOwnProperty.call(item, 'name')) {
      // Read as every option is, through its descriptors (a getter is refused, never invoked).
      const { name: given, ...rest } = exactObject(complain, at, item, NAMED_POLICY_SHAPE)
      name = given
      policyInput = rest
      if (typeof name !== 'string' || !NAME.test(name)) throw new AdmissionOptionError(`${at}.name`, NAME_TEXT, name)
    }
    const policy = normalizePolicy(policyInput, at, { algorithm: 'token-bucket' }, complain)
    if (policy.penalty !== undefined) throw new AdmissionOptionError(`${at}.penalty`, PENALTY_ALONE, policy.penalty.mode)
    const twin = policies.findIndex((p) => samePolicy(p.policy, policy))
    if (twin !== -1) throw new AdmissionOptionError(at, `a policy other than ${path}[${twin}] (the same policy twice limits nothing more)`, item)
    policies.push({ name: (tier === '' ? '' : `${tier}-`) + (name as string | undefined ?? defaultName(policy)), policy })
  }
  const names = new Set<string>()
  for (const [i, { name }] of policies.entries()) {
    if (names.has(name)) throw new AdmissionOptionError(`${path}[${i}].name`, `a name no other policy of the list has (the RateLimit headers list each policy by name; give each a \`name\`)`, name)
    names.add(name)
  }
  // A list of one is a policy: one state per client, and the path a single policy always had.
  if (policies.length === 1 && tier === '' && policies[0]!.name === defaultName(policies[0]!.policy)) return policies[0]!.policy
  return Object.freeze({ kind: 'stack', policies: Object.freeze(policies) })
}

/** `per-<w>s`: the window a client can plan by (the `w` of `RateLimit-Policy`). */
function defaultName (policy: Policy): string {
  return `per-${quotaOf(policy).windowSeconds}s`
}

function tiersOption (path: string, value: unknown): TierLimits {
  const input = exactObject(complain, path, value, TIER_SHAPE)
  const tier = input.tier
  if (typeof tier !== 'function' || Object.prototype.toString.call(tier) === '[object AsyncFunction]') {
    throw new AdmissionOptionError(`${path}.tier`, 'a synchronous function (request) => tier name, one of the names in tiers', tier)
  }
  const declared = input.tiers
  if (typeof declared !== 'object' || declared === null || Array.isArray(declared)) {
    throw new AdmissionOptionError(`${path}.tiers`, 'an object of tiers by name: { free: policy or list, pro: ... }', declared)
  }
  const names = Object.keys(declared)
  if (names.length === 0 || names.length > MAX_TIERS) throw new AdmissionOptionError(`${path}.tiers`, `an object of 1 to ${MAX_TIERS} tiers`, declared)
  const tiers = new Map<string, Readonly<Policy> | StackLimits>()
  for (const name of names) {
    const at = memberPath(`${path}.tiers`, name)
    if (!NAME.test(name)) throw new AdmissionOptionError(at, `a tier named as ${NAME_TEXT}`, name)
    const descriptor = Object.getOwnPropertyDescriptor(declared, name)!
    if (!('value' in descriptor)) throw new AdmissionOptionError(at, 'a data property', descriptor, { got: 'an accessor property (getter or setter), which is not invoked' })
    const one: unknown = descriptor.value
    if (typeof one === 'object' && one !== null && Object.prototype.hasOwnProperty.call(one, 'tiers')) throw new AdmissionOptionError(at, 'a policy or a list of policies (tiers do not nest)', one)
    tiers.set(name, Array.isArray(one) ? stackOption(at, one, name) : normalizePolicy(one, at, { algorithm: 'token-bucket' }, complain))
  }
  return Object.freeze({ kind: 'tiers', tiers, tier: tier as (request: FastifyRequest) => string })
}

/** Every policy the limits hold. */
export function policiesOf (limits: Limits): Readonly<Policy>[] {
  if (isTiers(limits)) return [...limits.tiers.values()].flatMap(policiesOf)
  if (isStack(limits)) return limits.policies.map((p) => p.policy)
  return [limits]
}

/** The largest cost every policy can take: the least capacity among them. */
export function capacityOfLimits (limits: Limits): number {
  return stackCapacity(policiesOf(limits))
}

/** Whether two limits (not tiers: a group cannot have them) are the same quota (groups check that every route of one agrees). */
export function sameLimits (a: Readonly<Policy> | StackLimits, b: Readonly<Policy> | StackLimits): boolean {
  if (isStack(a) !== isStack(b)) return false
  if (!isStack(a)) return samePolicy(a, b as Policy)
  const other = (b as StackLimits).policies
  return a.policies.length === other.length && a.policies.every((p, i) => p.name === other[i]!.name && samePolicy(p.policy, other[i]!.policy))
}
