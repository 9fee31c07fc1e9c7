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

/**
 * Login throttling's count, at the level of the registering context: last among the `onSend`
 * hooks of the context (the status it sees is the one sent), for a request whose plan counts failures.
 */
export function onSendByRoute (field: symbol): (request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (error: null, payload: unknown) => void) => void {
  return function admissionCountFailure (request, _reply, payload, done) {
    const permit = (request as unknown as Record<symbol, Permit | null | undefined>)[field]
    const told = permit?.plan.failures?.sending(permit)
    if (told === undefined) done(null, payload)
    else told.then(() => { done(null, payload) })
  }
}
