import { expectReasons, type Reason } from '../../metrics/reasons.js'
import type { RouteGate } from '../route-gate.js'

/**
 * What in a route's plan can refuse, and for which reasons: each part as the planner put its step
 * in the plan (or left it out). A route that does not enforce refuses only for pressure: its bounds
 * and quotas count what they would have refused, and a backend that cannot decide admits.
 */
export interface RefusingSteps {
  /** Pressure and queueing delay (retries shed first under a standing queue too). */
  readonly pressure: readonly Reason[]
  readonly enforce: boolean
  /** A backend that cannot decide refuses (`onBackendError: 'deny'`). */
  readonly failsClosed: boolean
  /** The registration's in-flight gate, when the route has it: why it is full (`in-flight`, a fleet's share). */
  readonly globalGate: readonly Reason[]
  /** Retries shed first (`retries`), within the in-flight limits' reserve. */
  readonly retries: boolean
  /** A long-lived route's place among the registration's long-lived connections (`maxLongLived`). */
  readonly longLived: boolean
  /** The client's in-flight slots: in this process, or the fleet's on its backend (which may fail). */
  readonly clientInFlight: 'process' | 'fleet' | undefined
  /** Login throttling: its quota's refusals are failed logins'. */
  readonly login: boolean
  /** The gates whose quota decides: the route's own, or its tiers'. */
  readonly quotas: readonly RouteGate[]
}

/**
 * Puts on each gate of a route the reasons its plan can refuse for, at 0 (`expectReasons`): those
 * of the steps before a tier is picked on the route's gate, a quota's on the gate that decides it.
 */
export function expectRefusals (gate: RouteGate, steps: RefusingSteps): void {
  const route: Reason[] = [...steps.pressure]
  if (steps.enforce) {
    route.push(...steps.globalGate)
    if (steps.retries && steps.globalGate.length > 0) route.push('retry-reserve')
    if (gate.maxInFlight !== 0) route.push('route-in-flight', ...(steps.retries ? ['route-retry-reserve' as const] : []))
    if (steps.longLived) route.push('long-lived')
    if (gate.maxLongLived !== 0) route.push('route-long-lived')
    if (steps.clientInFlight !== undefined) route.push('client-in-flight')
    if (steps.clientInFlight === 'fleet' && steps.failsClosed) route.push('backend-unavailable')
    for (const quota of steps.quotas) {
      expectReasons(quota.reasons, steps.login ? ['login-failures'] : quota.quotaReasons)
      if (steps.failsClosed) expectReasons(quota.reasons, ['backend-unavailable'])
    }
  }
  expectReasons(gate.reasons, route)
}
