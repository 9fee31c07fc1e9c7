import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import type { Plan } from './plan/planner.js'
import { Permit, type Step } from './release/permit.js'

export type GateHook = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void

/**
 * The gate's `onRequest` hook: **shed, then limit**, on the pure core. The request gets its
 * permit and runs its route's plan — pressure, the in-flight slots (the core's `acquire`), then
 * the client's quota (the core's `take`, or the backend's decision) — each step answering the
 * request or handing it on. `field` is the registration's request field for the permit.
 */
export function onRequestHook (plan: Plan, field: symbol): GateHook {
  const first = plan.onRequest
  return function admissionOnRequest (request, reply, done) {
    const permit = new Permit(request, reply, done, plan)
    ;(request as unknown as Record<symbol, Permit>)[field] = permit
    run(first, permit)
  }
}

/**
 * The same hook at the level of the registering context, for a registration that found routes
 * already declared (which never pass its `onRoute`): each request finds its route's plan, made
 * at `onRoute` or, for a route declared earlier, at its first request (`null`: not gated here).
 */
export function onRequestByRoute (planOf: (request: FastifyRequest) => Plan | null, field: symbol): GateHook {
  return function admissionOnRequest (request, reply, done) {
    const plan = planOf(request)
    if (plan === null) {
      done()
      return
    }
    const permit = new Permit(request, reply, done, plan)
    ;(request as unknown as Record<symbol, Permit>)[field] = permit
    run(plan.onRequest, permit)
  }
}

/** The rate check in `preHandler` (`hook: 'preHandler'`): after the route's own preHandlers, authentication among them. */
export function preHandlerHook (check: Step, field: symbol): GateHook {
  return function admissionRateCheck (request, _reply, done) {
    const permit = (request as unknown as Record<symbol, Permit>)[field]!
    permit.done = done
    run(check, permit)
  }
}

/** The same at the level of the registering context: the check of the request's plan, if it has one there. */
export function preHandlerByRoute (field: symbol): GateHook {
  return function admissionRateCheck (request, _reply, done) {
    const permit = (request as unknown as Record<symbol, Permit | null | undefined>)[field]
    const check = permit?.plan.preHandler
    if (check === undefined) {
      done()
      return
    }
    permit!.done = done
    run(check, permit!)
  }
}

/**
 * Runs the plan's steps for `permit`. Every callback of the application is contained where it is
 * called; what still throws (a logger that throws) is answered 500 unless the request was answered
 * already (`lost`) — not left to Fastify's hook runner, which takes a falsy throw for "go on".
 */
function run (step: Step, permit: Permit): void {
  try {
    step(permit)
  } catch (error) {
    permit.lost(error)
  }
}
