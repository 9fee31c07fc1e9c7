import type { FastifyRequest } from 'fastify'
import { AdmissionTierError } from '../../errors.js'
import type { Step } from '../../outcomes/recorder.js'
import type { RouteGate } from '../../route-gate.js'

/** A tier's gate (its quota, headers and counters) and the steps that decide on it. */
export interface Tier { readonly gate: RouteGate, readonly decide: Step }

/**
 * Tiers: `tier(request)` names the quota the request takes from. A name that is no declared tier,
 * or a `tier` that throws, answers 500 (`AdmissionTierError`, the declared names listed, never
 * the value) and the permit goes back.
 */
export function tierStep (tier: (request: FastifyRequest) => string, tiers: ReadonlyMap<string, Tier>): Step {
  return function pickTier (permit) {
    let name: unknown
    try {
      name = tier(permit.request)
    } catch (error) {
      permit.fail(error)
      return
    }
    const chosen = typeof name === 'string' ? tiers.get(name) : undefined
    if (chosen === undefined) {
      permit.fail(new AdmissionTierError(name, [...tiers.keys()]))
      return
    }
    permit.gate = chosen.gate
    chosen.decide(permit)
  }
}
