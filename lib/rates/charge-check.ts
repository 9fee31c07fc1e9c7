import type { Policy } from '../core/rates/types.js'
import { RatesInvalidArgumentError } from './errors.js'
import { encodeIdentity, validateUnits } from './identity.js'
import { chargeProblem } from './policy.js'

/** A charge's arguments once checked: the encoded identity and the units. */
export interface CheckedCharge {
  readonly key: string
  readonly units: number
}

/**
 * Checks a charge before it reaches the backend, in the order a caller can fix them: a backend
 * that can charge, every policy with room for a debt of one capacity (`chargeProblem()`: a single
 * limiter's is `policy`, a stack's `policies[i]`), the identity, the units (|units| <= `capacity`).
 * Throws the first `RatesInvalidArgumentError` (or the identity's error); changes nothing.
 */
export function checkCharge (kind: string, canCharge: boolean, quota: Readonly<Policy> | readonly Readonly<Policy>[], identity: unknown, units: unknown, capacity: number, capacityName?: string): CheckedCharge {
  if (!canCharge) throw new RatesInvalidArgumentError('units', `a backend that charges after the work (RatesBackend.limiter().charge): the ${JSON.stringify(kind)} backend has none`, units)
  const policies = Array.isArray(quota) ? quota : [quota]
  policies.forEach((policy, i) => {
    const problem = chargeProblem(policy)
    const path = Array.isArray(quota) ? `policies[${i}]` : 'policy'
    if (problem !== undefined) throw new RatesInvalidArgumentError(path, 'a policy with room for a debt of one capacity (a smaller burst or windowMs)', { ...policy }, { got: problem })
  })
  return { key: encodeIdentity(identity), units: validateUnits(units, capacity, capacityName) }
}
