import type { Policy } from '../core/rates/types.js'
import type { BackendLimiter } from '../rates/backend.js'
import { samePolicy } from '../rates/policy.js'
import { describePolicy } from './policy-text.js'
import { AdmissionOptionError } from './errors.js'
import type { Quotas } from './quotas.js'

/**
 * Route groups (`config.admission.groupId`, as @fastify/rate-limit's): every route naming a group
 * takes from the group's one quota, at the address `group:<id>` of the registration — the same in
 * every process, apart from the plugin's shared quota and from routes' own. A group has one policy:
 * a route that names it with another is refused, naming the route that set it first.
 */
export class Groups {
  private readonly quotas: Quotas
  private readonly opened = new Map<string, { readonly limiter: BackendLimiter | undefined, readonly policy: Readonly<Policy>, readonly route: string }>()

  constructor (quotas: Quotas) {
    this.quotas = quotas
  }

  open (groupId: string, policy: Readonly<Policy>, route: string, path: string): BackendLimiter | undefined {
    const group = this.opened.get(groupId)
    if (group === undefined) {
      const limiter = this.quotas.open(`group:${groupId}`, policy)
      this.opened.set(groupId, { limiter, policy, route })
      return limiter
    }
    if (!samePolicy(group.policy, policy)) {
      throw new AdmissionOptionError(path, `a route of group "${groupId}" with its policy, ${describePolicy(group.policy)} (set by ${group.route}); give every route of a group the same rateLimit`, groupId, { got: `${JSON.stringify(groupId)} with ${describePolicy(policy)}` })
    }
    return group.limiter
  }
}
