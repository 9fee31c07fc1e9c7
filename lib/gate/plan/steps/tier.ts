import type { FastifyRequest } from 'fastify'
import { isThenable, settleUnused, type Contained } from '../../../callbacks/contained.js'
import { AdmissionTierError } from '../../errors.js'
import type { Step } from '../../outcomes/recorder.js'
import type { RouteGate } from '../../route-gate.js'

/** A tier's gate (its quota, headers and counters) and the steps that decide on it. */
export interface Tier { readonly gate: RouteGate, readonly decide: Step }

/**
 * Tiers: `tier(request)` names the quota the request takes from. A name that is no declared tier,
 * answers 500 (`AdmissionTierError`, the declared names listed, never the value), and so does a
 * `tier` that throws (its own error): without a tier there is no quota to decide on. The permit
 * goes back; logged once for the route (`contained`).
 */
export function tierStep (tier: (request: FastifyRequest) => string, tiers: ReadonlyMap<string, Tier>, contained: Contained): Step {
  return function pickTier (permit) {
    let name: unknown
    try {
      name = tier(permit.request)
    } catch (error) {
      contained.failed(error)
      permit.fail(error, 'tier')
      return
    }
    const chosen = typeof name === 'string' ? tiers.get(name) : undefined
    if (chosen === undefined) {
      if (isThenable(name)) settleUnused(name)
      const error = new AdmissionTierError(name, [...tiers.keys()])
      contained.failed(error)
      permit.fail(error)
      return
    }
    contained.worked()
    permit.gate = chosen.gate
    chosen.decide(permit)
  }
}
