import type { FastifyBaseLogger, RouteOptions } from 'fastify'

/**
 * A route that carries @fastify/rate-limit's per-route key, `config.rateLimit`, in an app where this
 * plugin gates it: this plugin reads `config.admission`, so a route migrated halfway would lose its
 * own limit without a word. Warned once per route at startup (not refused: during a migration both
 * plugins may run side by side, and the key is then theirs).
 */
export function warnForeignRateLimit (route: RouteOptions, log: FastifyBaseLogger): void {
  // Object(): a route without config (Fastify gives every route one, but the type allows none).
  const config = Object(route.config) as { rateLimit?: unknown, admission?: unknown }
  if (config.rateLimit === undefined || config.admission === false) return
  const routeName = `${Array.isArray(route.method) ? route.method.join(',') : route.method} ${route.url}`
  log.warn({ route: routeName }, `fastify-admission: ${routeName} has config.rateLimit (@fastify/rate-limit's option), which this plugin does not read; this plugin's limit for the route is config.admission.rateLimit (see docs/migration/rate-limit.md)`)
}
