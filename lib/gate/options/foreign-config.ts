import type { FastifyBaseLogger, RouteOptions } from 'fastify'
import { RATE_LIMIT_GUIDE } from './peer-options.js'

/**
 * Routes that carry @fastify/rate-limit's per-route key, `config.rateLimit`, in an app where this
 * plugin gates them: this plugin reads `config.admission`, so a route migrated halfway would lose
 * its own limit (or, with `rateLimit: false`, its opt-out) without a word. Warned once per route at
 * startup — the HEAD route Fastify adds for a GET is that route — and not refused: during a
 * migration both plugins may run side by side, and the key is then theirs. `limited` says whether
 * the plugin has a limit of its own, which a route without `config.admission.rateLimit` takes.
 */
export function foreignRateLimitWarner (log: FastifyBaseLogger, limited: boolean): (route: RouteOptions) => void {
  const getUrls = new Set<string>()
  return (route) => {
    // Object(): a route without config (Fastify gives every route one, but the type allows none).
    const config = Object(route.config) as { rateLimit?: unknown, admission?: unknown }
    if (config.rateLimit === undefined || config.admission === false) return
    const methods = Array.isArray(route.method) ? route.method : [route.method]
    if (methods.length === 1 && methods[0] === 'HEAD' && getUrls.has(route.url)) return
    if (methods.includes('GET')) getUrls.add(route.url)
    const routeName = `${methods.join(',')} ${route.url}`
    if (config.rateLimit !== false) {
      log.warn({ route: routeName }, `fastify-admission: ${routeName} has config.rateLimit (@fastify/rate-limit's option), which this plugin does not read; this plugin's limit for the route is config.admission.rateLimit (see ${RATE_LIMIT_GUIDE})`)
      return
    }
    const own = (Object(config.admission) as { rateLimit?: unknown }).rateLimit
    if (own === undefined ? !limited : own === false) return
    log.warn({ route: routeName }, `fastify-admission: ${routeName} has config.rateLimit: false (@fastify/rate-limit's opt-out), which this plugin does not read: the route is rate limited by this plugin; to opt it out, give it config.admission: false (or config.admission.rateLimit: false to keep only shedding; see ${RATE_LIMIT_GUIDE})`)
  }
}
