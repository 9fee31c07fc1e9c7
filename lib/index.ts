import { admissionPlugin } from './gate/plugin.js'

// What an application uses, and no more (docs/decisions.md, "The main entry's surface"): the
// plugin, the backends, the error classes by kind, and the types an application writes. A type
// it reads off another (a policy's algorithm, a backend's client, a stat's counters) is reached as
// a member: `AdmissionOptions['pressure']`, `RedisBackendOptions['client']`. `test/package/surface.test.ts`
// counts these names with the TypeScript compiler and holds them to 45.

export { admissionPlugin as admission }
export default admissionPlugin

// The plugin's options, its answers (stats, pressure, decision events) and the refusal an
// `errorResponseBuilder` is told about.
export type { AdmissionOptions, AdmissionRouteOptions } from './gate/options/options.js'
export type { AdmissionRefusalContext } from './gate/options/error-response.js'
export type { AdmissionStats } from './gate/stats.js'
export type { PressureStatus } from './pressure/pressure.js'
export { DECISION_CHANNEL } from './metrics/events.js'
export type { AdmissionDecisionEvent } from './metrics/events.js'
// @fastify/under-pressure's names for its signals (docs/migration/under-pressure.md).
export { TYPE_EVENT_LOOP_DELAY, TYPE_EVENT_LOOP_UTILIZATION, TYPE_HEALTH_CHECK, TYPE_HEAP_USED_BYTES, TYPE_RSS_BYTES } from './pressure/signals.js'
export { normalizeIP } from './gate/client-key.js'

// Errors, by kind; `code` tells the cases of a kind apart (docs/errors.md).
export { AdmissionError, AdmissionOptionError, AdmissionCallbackError, AdmissionRefusalError } from './gate/errors.js'
export { RatesError, RatesInvalidArgumentError, RatesPolicyConflictError, RatesUnavailableError, RatesStoppedError } from './rates/errors.js'

// The backends, and what a backend of the application's own implements.
export { memoryBackend, MemoryBackend } from './backends/memory/memory-backend.js'
export type { MemoryBackendOptions } from './backends/memory/memory-backend.js'
export { redisBackend, RedisBackend } from './backends/redis/redis-backend.js'
export type { RedisBackendOptions } from './backends/redis/redis-backend.js'
export type { RatesBackend, BackendLimiter, StackLimiter } from './rates/backend.js'

// The rates capability (`app.rates`): a policy, an identity, a limiter and its decision.
export type { Identity, RatePolicy, RateLimiter, StackedRateLimiter } from './rates/rates.js'
export type { RateDecision, StackDecision } from './rates/decision.js'
