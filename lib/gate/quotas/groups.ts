import type { BackendLimiter } from '../../rates/backend.js'
import { describeLimits } from '../options/policy-text.js'
import { sameLimits, type StackLimits } from '../options/limits.js'
import type { Policy } from '../../core/rates/types.js'
import { AdmissionOptionError } from '../errors.js'
import type { Quotas } from './quotas.js'

/**
 * Route groups (`config.admission.groupId`, as @fastify/rate-limit's): every route naming a group
 * takes from the group's one quota, at the address `group:<id>` of the registration — the same in
 * every process, apart from the plugin's shared quota and from routes' own. A group has one policy:
 * a route that names it with another is refused, naming the route that set it first.
 */
export class Groups {
  private readonly quotas: Quotas
  private readonly opened = new Map<string, { readonly limiter: BackendLimiter | undefined, readonly policy: Readonly<Policy> | StackLimits, readonly route: string }>()

  constructor (quotas: Quotas) {
    this.quotas = quotas
  }

  open (groupId: string, policy: Readonly<Policy> | StackLimits, route: string, path: string): BackendLimiter | undefined {
    const group = this.opened.get(groupId)
    if (group === undefined) {
      const limiter = this.quotas.open(`group:${groupId}`, policy)
      this.opened.set(groupId, { limiter, policy, route })
      return limiter
    }
    if (!sameLimits(group.policy, policy)) {
      throw new AdmissionOptionError(path, `a route of group "${groupId}" with its policy, ${describeLimits(group.policy)} (set by ${group.route}); give every route of a group the same rateLimit`, groupId, { got: `${JSON.stringify(groupId)} with ${describeLimits(policy)}` })
    }
    return group.limiter
  }
}
