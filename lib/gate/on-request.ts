import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import type { Plan } from './plan/plan.js'
import { runSteps, type Step } from './plan/steps.js'
import { Permit } from './release/permit.js'

export type GateHook = (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void

/**
 * The gate's `onRequest` hook: **shed, then limit**, on the pure core. The request gets its
 * permit and runs its route's plan — pressure, the in-flight slots (the core's `acquire`), then
 * the client's quota (the core's `take`, or the backend's decision) — each step answering the
 * request or handing it on. `field` is the registration's request field for the permit.
 */
export function onRequestHook (plan: Plan, field: symbol): GateHook {
  const steps = plan.onRequest
  return function admissionOnRequest (request, reply, done) {
    const permit = new Permit(request, reply, done, plan)
    ;(request as unknown as Record<symbol, Permit>)[field] = permit
    runSteps(steps, permit, 0)
  }
}

/** A registration whose hooks are its context's: where it sits, how deep, its request field, its hook. */
export interface ContextGate {
  readonly context: FastifyInstance
  readonly depth: number
  readonly field: symbol
  readonly hook: GateHook
}

/**
 * The same hook at the level of the registering context, for a registration that found routes
 * already declared (which never pass its `onRoute`): each request finds its route's plan, made
 * at `onRoute` or, for a route declared earlier, at its first request (`null`: not gated here).
 *
 * A context's hooks run in the order they were added, so a registration inside another that was
 * loaded first would decide first; `outerOf(context)` lists the enclosing registrations with
 * context hooks, outermost first, and one that has not decided on the request yet is run ahead
 * (its own hook, later in the list, then finds its permit taken and goes on).
 */
export function onRequestByRoute (planOf: (request: FastifyRequest) => Plan | null, field: symbol, outerOf: (context: FastifyInstance) => readonly ContextGate[]): GateHook {
  const start = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    const plan = planOf(request)
    if (plan === null) {
      done()
      return
    }
    const permit = new Permit(request, reply, done, plan)
    ;(request as unknown as Record<symbol, Permit>)[field] = permit
    runSteps(plan.onRequest, permit, 0)
  }
  return function admissionOnRequest (this: FastifyInstance, request, reply, done) {
    // A context made before the registration decorated the request has no field at all (Fastify
    // sets decorations in the request's constructor): undefined is "no permit" too.
    const fields = request as unknown as Record<symbol, Permit | null | undefined>
    // Run already, ahead of its place, by a registration inside this one.
    if (fields[field] != null) {
      done()
      return
    }
    for (const outer of outerOf(this)) {
      if (fields[outer.field] == null) {
        outer.hook.call(this, request, reply, (error?: Error) => {
          if (error !== undefined) done(error)
          else start(request, reply, done)
        })
        return
      }
    }
    start(request, reply, done)
  }
}

/** The rate check in `preHandler` (`hook: 'preHandler'`): after the route's own preHandlers, authentication among them. */
export function preHandlerHook (check: readonly Step[], field: symbol): GateHook {
  return function admissionRateCheck (request, _reply, done) {
    const permit = (request as unknown as Record<symbol, Permit>)[field]!
    permit.done = done
    runSteps(check, permit, 0)
  }
}

/** The same at the level of the registering context: the check of the request's plan, if it has one there (a route with hooks of its own runs its own). */
export function preHandlerByRoute (field: symbol): GateHook {
  return function admissionRateCheck (request, _reply, done) {
    const permit = (request as unknown as Record<symbol, Permit | null | undefined>)[field]
    const check = permit?.plan.byContext === true ? (permit.plan as Plan).preHandler : undefined
    if (check === undefined) {
      done()
      return
    }
    permit!.done = done
    runSteps(check, permit!, 0)
  }
}
