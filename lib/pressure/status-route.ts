import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { AdmissionOptionError } from '../validation/errors.js'
import type { PressureSettings } from './options.js'
import type { Pressure } from './pressure.js'

/**
 * The status route (`exposeStatusRoute`), as under-pressure's: `200 { status: 'ok' }`, and `503`
 * with `Retry-After` while under pressure. Whoever reaches it reads its body, so by default that is
 * all it says; with `expose: 'details'` it adds the reason (which signal, its value, its limit),
 * the readings, the limits, the counters and an object the `healthCheck` answers. The health check
 * runs at most once per `sampleInterval` whatever the number of calls (`Sampler.health`). The
 * route is not gated by this registration (`config.admission: false`): a probe must get the answer,
 * not a shed. A route of the application at the same URL fails the registration with an
 * `AdmissionOptionError` that says how to choose another.
 */
export function exposeStatusRoute (fastify: FastifyInstance, settings: PressureSettings, pressure: Pressure): void {
  const route = settings.statusRoute!
  const sampler = pressure.sampler!
  const config = { ...(route.routeOpts.config as Record<string, unknown> | undefined), admission: false as const }
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
        return details ? { ...(typeof answer === 'object' && answer !== null ? answer : {}), status: 'ok', ...status } : { status: 'ok' }
      }
    })
  } catch (error) {
    if ((error as { code?: unknown }).code !== 'FST_ERR_DUPLICATED_ROUTE') throw error
    const taken = new AdmissionOptionError('pressure.exposeStatusRoute', `a URL no route of the application has (GET ${route.url} is already declared: give the status route another, as in exposeStatusRoute: { url: '/admission/status' }, or remove the application's route)`, route.url)
    Object.defineProperty(taken, 'cause', { value: error, configurable: true, writable: true })
    throw taken
  }
}
