import type { FastifyReply, FastifyRequest } from 'fastify'
import { AdmissionOptionError } from '../errors.js'
import { chargeProblem } from '../../rates/policy.js'
import { isStack, isTiers, type Limits } from './limits.js'
import type { CountMode } from './login-options.js'

/** A route's `charge`: the units the request really took, known once its work is done. */
export type ChargeCallback = (request: FastifyRequest, reply: FastifyReply) => number | PromiseLike<number>

/**
 * `config.admission.charge`: absent, or a function (synchronous or async) on a route with a quota
 * to charge (not login throttling's, which takes only failures) whose every policy has room for a
 * debt of one capacity.
 */
export function chargeOption (path: string, value: unknown, limits: Limits | false, count: CountMode): ChargeCallback | undefined {
  if (value === undefined) return undefined
  if (typeof value !== 'function') {
    throw new AdmissionOptionError(path, 'a function (request, reply) => units (a number, or a promise of one): what the request really took, charged when its response ends', value)
  }
  if (limits === false) throw new AdmissionOptionError(path, 'absent where there is no rate limit (a charge takes from a quota)', value)
  if (count === 'failures') throw new AdmissionOptionError(path, "absent with count: 'failures' (login throttling takes from its quota only for a failure)", value)
  for (const one of isTiers(limits) ? [...limits.tiers.values()] : [limits]) {
    for (const policy of isStack(one) ? one.policies.map((named) => named.policy) : [one]) {
      const problem = chargeProblem(policy)
      if (problem !== undefined) throw new AdmissionOptionError(path, `absent with a policy that cannot hold a debt of one capacity (${problem}): a smaller burst or windowMs`, value)
    }
  }
  return value as ChargeCallback
}
