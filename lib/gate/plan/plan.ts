import type { LoginAttempts } from './login-attempts.js'
import type { PermitRoute } from '../release/permit.js'
import { runSteps, type Resume, type Step, type TierSteps } from './steps.js'

export type { Step }

/**
 * A route's plan: its steps, assembled once from the features the route uses (an off feature is
 * absent, not a branch taken per request), run by one loop (`runSteps`), and what the route does
 * when a permit ends.
 */
export interface Plan extends PermitRoute {
  /** What runs in `onRequest`: shed, then (unless it runs in `preHandler`) limit. */
  readonly onRequest: readonly Step[]
  /** The rate check, when it runs in `preHandler` (after authentication). */
  readonly preHandler: readonly Step[] | undefined
  /** Login throttling: failed responses take from the quota (counted in `onSend`). */
  readonly failures: LoginAttempts | undefined
}

/** A plan's list of steps as it is put together: a step that resumes the request later is given where the rest starts. */
export class StepList {
  readonly steps: Step[] = []

  add (step: Step): this {
    this.steps.push(step)
    return this
  }

  /** Adds the step `make` builds, given the rest of the plan after it (for a request it stops and resumes). */
  addResuming (make: (rest: Resume) => Step): this {
    const steps = this.steps
    const from = steps.length + 1
    return this.add(make((permit) => { runSteps(steps, permit, from) }))
  }
}

/** What `app.admission.plan(route)` shows: each hook's steps by name, in order; a tier step's steps under its tiers. */
export interface PlanListing {
  readonly onRequest: readonly string[]
  readonly preHandler: readonly string[]
  readonly tiers?: { readonly [tier: string]: readonly string[] }
}

/** The steps of a plan by name, in the order they run. */
export function listPlan (plan: Plan): PlanListing {
  const names = (steps: readonly Step[]): string[] => steps.map((step) => step.name)
  const listing: { onRequest: string[], preHandler: string[], tiers?: Record<string, string[]> } = { onRequest: names(plan.onRequest), preHandler: names(plan.preHandler ?? []) }
  for (const step of [...plan.onRequest, ...(plan.preHandler ?? [])]) {
    const tiers = (step as Step & { tiers?: TierSteps }).tiers
    if (tiers !== undefined) listing.tiers = Object.fromEntries(Object.entries(tiers).map(([tier, steps]) => [tier, names(steps)]))
  }
  return listing
}
