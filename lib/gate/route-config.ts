import type { FastifyRequest } from 'fastify'

type Config = Record<symbol, unknown>

/**
 * Reads a request's route config. `request.routeOptions` builds a fresh twelve-field object on
 * every access; the config itself hangs off Fastify's route context, an own symbol property of
 * every request (described `fastify.context`). The symbol is found once, on the first request;
 * should a Fastify version not have it, every read falls back to `routeOptions`.
 */
export function routeConfigReader (): (request: FastifyRequest) => Config {
  let context: symbol | null | undefined
  return (request) => {
    if (context === undefined) {
      context = Object.getOwnPropertySymbols(request).find((symbol) => symbol.description === 'fastify.context') ?? null
    }
    if (context !== null) {
      const config = ((request as unknown as Record<symbol, { config?: Config } | undefined>)[context])?.config
      if (config !== undefined) return config
    }
    return request.routeOptions.config as unknown as Config
  }
}
