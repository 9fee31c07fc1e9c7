/**
 * OpenTelemetry instrument names after the prefix, as docs/guides/metrics.md lists them: the
 * `aspnetcore.rate_limiting.*` style (OpenTelemetry has no convention for rate limiting yet).
 */
export const INSTRUMENT_NAMES = Object.freeze({
  requests: 'requests',
  refusals: 'refusals',
  attempts: 'attempts',
  activeRequests: 'active_requests',
  inFlightLimit: 'in_flight_limit',
  routeActiveRequests: 'route.active_requests',
  routeInFlightLimit: 'route.in_flight_limit',
  backendErrors: 'backend.errors',
  decisionDuration: 'backend.decision.duration'
})

/** The longest name after the prefix: a prefix leaves it room within OpenTelemetry's 255 characters. */
export const LONGEST_INSTRUMENT_NAME = Math.max(...Object.values(INSTRUMENT_NAMES).map((name) => name.length))

/** Attribute names: fixed whatever the prefix (dashboards and alerts keep them). */
export const ATTRIBUTES = Object.freeze({
  registration: 'fastify.admission.registration',
  route: 'fastify.admission.route',
  outcome: 'fastify.admission.outcome',
  reason: 'fastify.admission.reason',
  attempt: 'fastify.admission.attempt',
  policy: 'fastify.admission.policy',
  httpRoute: 'http.route'
})
