import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import type { Permit } from './release/permit.js'

/**
 * The gate's `onResponse` hook: the core's `release`. The response is written, so the request's
 * permit gives its slots back — once, and only when the handler's own work has ended too (see
 * `Permit`); a permit already ended (refused, or its client gone) is left as it is.
 */
export function onResponseHook (field: symbol): (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void {
  return function admissionOnResponse (request, _reply, done) {
    ;(request as unknown as Record<symbol, Permit | null | undefined>)[field]?.responded()
    done()
  }
}

/** The same at the level of the registering context: the permits its `onRequest` made (a route with hooks of its own runs its own). */
export function onResponseByRoute (field: symbol): (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void {
  return function admissionOnResponse (request, _reply, done) {
    const permit = (request as unknown as Record<symbol, Permit | null | undefined>)[field]
    if (permit?.plan.byContext === true) permit.responded()
    done()
  }
}
