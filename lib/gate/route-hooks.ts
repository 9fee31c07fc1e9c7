import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import type { AllowMatcher } from './allow-list.js'
import type { Permits } from './permits.js'
import { NORMAL, takeByPriority } from './priority.js'
import type { RateCheck } from './rate-check.js'
import type { RouteGate } from './route-gate.js'

export type GateHook = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void

/** What a route's options chose, at `onRoute`: each feature that is off adds nothing to the hooks. */
export interface HookChoice {
  /** The rate check runs in `preHandler` (after authentication); shedding stays in `onRequest`. */
  readonly preHandler: boolean
  readonly allowList: AllowMatcher | undefined
  /** The allow list decides before shedding (only with the check in `onRequest`). */
  readonly allowListSkipsShedding: boolean
  /** `enforce: false`: a full gate lets the request on (`check` is a `ShadowCheck`). */
  readonly shadow: boolean
}

/**
 * A route's gate hooks: `onRequest` (shed, then — unless it runs in `preHandler` — limit) and the
 * `preHandler` when there is one. The check (`RateCheck`, or its shadow or custom-refusal kind)
 * was chosen for the route too. Options that are off pick the plain hook, as it always was.
 */
export function gateHooks (gate: RouteGate, permits: Permits, check: RateCheck, choice: HookChoice): { onRequest: GateHook, preHandler?: GateHook } {
  const limited = gate.limiter !== undefined
  const allows = choice.allowList
  if (allows !== undefined && choice.allowListSkipsShedding) {
    return {
      onRequest: function admissionOnRequest (request, reply, done) { check.runAllowingFirst(request, reply, gate, allows, done) }
    }
  }
  const rateStep: GateHook | undefined = !limited
    ? undefined
    : allows === undefined
      ? function admissionRateCheck (request, reply, done) { check.run(request, reply, gate, done) }
      : function admissionRateCheck (request, reply, done) { check.runAllowing(request, reply, gate, allows, done) }
  if (rateStep !== undefined && choice.preHandler) {
    return {
      onRequest: function admissionOnRequest (request, reply, done) {
        if (takeByPriority(permits, request, reply, gate) || check.whenFull(request, reply, gate, done)) done()
      },
      preHandler: rateStep
    }
  }
  if (choice.shadow || (rateStep !== undefined && allows !== undefined)) {
    return {
      onRequest: function admissionOnRequest (request, reply, done) {
        if (!takeByPriority(permits, request, reply, gate) && !check.whenFull(request, reply, gate, done)) return
        if (rateStep === undefined) check.admit(request, gate, done)
        else rateStep(request, reply, done)
      }
    }
  }
  // The default: shed, then limit, with nothing else to ask; a `normal` route's path is the one
  // it was before priorities.
  if (gate.priority === NORMAL) {
    return {
      onRequest: function admissionOnRequest (request, reply, done) {
        if (!permits.take(request, reply, gate)) check.shed(request, reply, gate, done)
        else if (gate.limiter === undefined) check.admit(request, gate, done)
        else check.run(request, reply, gate, done)
      }
    }
  }
  return {
    onRequest: function admissionOnRequest (request, reply, done) {
      if (!permits.takePrioritized(request, reply, gate)) check.shed(request, reply, gate, done)
      else if (gate.limiter === undefined) check.admit(request, gate, done)
      else check.run(request, reply, gate, done)
    }
  }
}

/**
 * The `preHandler` for not-found handlers (`app.admission.notFound`): requests that match no route
 * hold no permit (a 404 does no work to protect) and are refused while the global gate is full —
 * allow-listed ones too — or take from the shared quota.
 */
export function notFoundHook (gate: RouteGate, permits: Permits, check: RateCheck, allows: AllowMatcher | undefined, shadow: boolean): GateHook {
  if (allows === undefined && !shadow) {
    return function admissionNotFound (request, reply, next) {
      if (permits.full) check.shed(request, reply, gate, next)
      else if (gate.limiter === undefined) check.admit(request, gate, next)
      else check.run(request, reply, gate, next)
    }
  }
  return function admissionNotFound (request, reply, next) {
    if (permits.full && !check.whenFull(request, reply, gate, next)) return
    if (gate.limiter === undefined) check.admit(request, gate, next)
    else if (allows === undefined) check.run(request, reply, gate, next)
    else check.runAllowing(request, reply, gate, allows, next)
  }
}
