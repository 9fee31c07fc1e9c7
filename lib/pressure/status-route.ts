import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { AdmissionOptionError } from '../validation/errors.js'
import type { PressureSettings } from './options.js'
import type { Pressure } from './pressure.js'

/**
 * On a route's config: no registration of this plugin gates the route (the status route's mark,
 * a symbol so that the application's config gets no key it did not give; `Symbol.for`, so that
 * every copy of the package reads it).
 */
export const UNGATED = Symbol.for('fastify-admission.ungated')

/**
 * The status route (`exposeStatusRoute`), as under-pressure's: `200 { status: 'ok' }`, and `503`
 * with `Retry-After` while under pressure. Whoever reaches it reads its body, so by default that is
 * all it says; with `expose: 'details'` it adds the reason (which signal, its value, its limit),
 * the readings, the limits, the counters and an object the `healthCheck` answers. The health check
 * runs at most once per `sampleInterval` whatever the number of calls (`Sampler.health`). The
 * route is not gated by any registration (`UNGATED` on its config): a probe must get the answer,
 * not a shed. A route of the application at the same URL fails the registration with an
 * `AdmissionOptionError` that says how to choose another.
 */
export function exposeStatusRoute (fastify: FastifyInstance, settings: PressureSettings, pressure: Pressure): void {
  const route = settings.statusRoute!
  const sampler = pressure.sampler!
  // Fastify copies a route's config into its context: the application's object is never changed,
  // and the route's config has no key it did not give (a symbol, which no registration of this
  // plugin gates, whichever copy of the package it is).
  const config: Record<string | symbol, unknown> = { ...(route.routeOpts.config as Record<string, unknown> | undefined), [UNGATED]: true }
  const details = route.expose === 'details'
  try {
    fastify.route({
      ...route.routeOpts,
      ...(route.schema === undefined ? {} : { schema: route.schema }),
      config,
      method: 'GET',
      url: route.url,
      handler: async function admissionStatus (_request: FastifyRequest, reply: FastifyReply) {
        const answer = settings.healthCheck === undefined ? undefined : await sampler.health()
        const status = pressure.status()
        if (status.underPressure) {
          reply.code(503).header('retry-after', String(settings.retryAfter))
          return details ? { status: 'under-pressure', ...status } : { status: 'under-pressure' }
        }
        const given = typeof answer === 'object' && answer !== null ? answer as Record<string, unknown> : {}
        // The health check's own `status` (a string) is the answer's, as under-pressure's route
        // answers it; its other fields only with `expose: 'details'`.
        const ok = typeof given.status === 'string' ? given.status : 'ok'
        return details ? { ...given, status: ok, ...status } : { status: ok }
      }
    })
  } catch (error) {
    if ((error as { code?: unknown }).code !== 'FST_ERR_DUPLICATED_ROUTE') throw error
    const taken = new AdmissionOptionError('pressure.exposeStatusRoute', `a URL no route of the application has (GET ${route.url} is already declared: give the status route another, as in exposeStatusRoute: { url: '/admission/status' }, or remove the application's route)`, route.url)
    Object.defineProperty(taken, 'cause', { value: error, configurable: true, writable: true })
    throw taken
  }
}
