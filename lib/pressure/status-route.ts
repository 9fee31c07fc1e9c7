import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { AdmissionOptionError } from '../validation/errors.js'
import type { PressureSettings } from './options.js'
import type { Pressure } from './pressure.js'

/**
 * The status route (`exposeStatusRoute`), as under-pressure's: `200 { status: 'ok', … }`, and
 * `503` with `Retry-After` while under pressure — here with the reason (which signal, its value,
 * its limit) and the readings. With a `healthCheck`, each call runs it (as under-pressure) and an
 * object it answers is merged into the 200 body. The route is not gated by this registration
 * (`config.admission: false`): a probe must get the answer, not a shed. A route of the
 * application at the same URL fails the registration with an `AdmissionOptionError` that says how
 * to choose another.
 */
export function exposeStatusRoute (fastify: FastifyInstance, settings: PressureSettings, pressure: Pressure): void {
  const route = settings.statusRoute!
  const sampler = pressure.sampler!
  const config = { ...(route.routeOpts.config as Record<string, unknown> | undefined), admission: false as const }
  try {
    fastify.route({
      ...route.routeOpts,
      ...(route.schema === undefined ? {} : { schema: route.schema }),
      config,
      method: 'GET',
      url: route.url,
      handler: async function admissionStatus (_request: FastifyRequest, reply: FastifyReply) {
        const answer = settings.healthCheck === undefined ? undefined : await sampler.checkHealth()
        const status = pressure.status()
        if (status.underPressure) {
          reply.code(503).header('retry-after', String(settings.retryAfter))
          return { status: 'under-pressure', ...status }
        }
        return { ...(typeof answer === 'object' && answer !== null ? answer : {}), status: 'ok', ...status }
      }
    })
  } catch (error) {
    if ((error as { code?: unknown }).code !== 'FST_ERR_DUPLICATED_ROUTE') throw error
    const taken = new AdmissionOptionError('pressure.exposeStatusRoute', `a URL no route of the application has (GET ${route.url} is already declared: give the status route another, as in exposeStatusRoute: { url: '/admission/status' }, or remove the application's route)`, route.url)
    Object.defineProperty(taken, 'cause', { value: error, configurable: true, writable: true })
    throw taken
  }
}
