import { admissionPlugin } from './gate/plugin.js'

export { admissionPlugin as admission }
export { AdmissionError, AdmissionOptionError, AdmissionKeyError, AdmissionAllowListError, AdmissionTierError, AdmissionChargeError, AdmissionCallbackError, AdmissionRefusalError } from './gate/errors.js'
export { AdmissionScopeError } from './gate/errors.js'
export type { AdmissionHook, AdmissionOptions, AdmissionRouteOptions, NamedRateLimitOptions, RateLimitOption, RateLimitOptions, TieredRateLimitOptions } from './gate/options/options.js'
export type { CountMode, FailedResponse } from './gate/plan/login-attempts.js'
export type { AdaptiveInFlightOptions } from './gate/options/in-flight-options.js'
export type { PriorityName as AdmissionPriority } from './gate/release/priority.js'
export type { AdmissionRefusalContext, ErrorResponseBuilder } from './gate/options/error-response.js'
export type { AllowListFunction, AllowListOption } from './gate/options/allow-list.js'
export type { RefusalReason } from './gate/outcomes/refusal-text.js'
export type { AdmissionDecorator, AdmissionRegistry } from './gate/decorator.js'
export type { AdmissionStats, GateCounters } from './gate/stats.js'
export type { PressureOptions, PressureHandler, QueueDelayOptions, StatusRouteOptions } from './pressure/options.js'
export type { PressureCounts, PressureStatus, ShedReason } from './pressure/pressure.js'
export type { PressureReadings, Signal } from './pressure/signals.js'
export { TYPE_EVENT_LOOP_DELAY, TYPE_EVENT_LOOP_UTILIZATION, TYPE_HEALTH_CHECK, TYPE_HEAP_USED_BYTES, TYPE_RSS_BYTES } from './pressure/signals.js'
export { normalizeIP } from './gate/quotas/client-key.js'
export type { AdmissionMetricsOptions, MetricsRegistry, OpenTelemetryMetricsOptions, PrometheusMetricsOptions } from './metrics/options.js'
export type { MetricsMeter } from './metrics/meter.js'
export { DECISION_CHANNEL } from './metrics/events.js'
export type { AdmissionDecisionEvent, AdmissionOutcome } from './metrics/events.js'

export { memoryBackend, MemoryBackend } from './backends/memory/memory-backend.js'
export type { MemoryBackendOptions } from './backends/memory/memory-backend.js'
export { redisBackend, RedisBackend } from './backends/redis/redis-backend.js'
export type { NodeRedisScriptClient, NodeRedisScriptOptions, RedisBackendClient, RedisBackendOptions, RedisClientShape, RedisDenyCacheOptions, RedisLeaseOptions, RedisScriptClient } from './backends/redis/redis-backend.js'
export type { RatesBackend, BackendLimiter, StackLimiter } from './rates/backend.js'
export type { RateDecision, RateAllowed, RateDenied, StackDecision, PolicyOutcome } from './rates/decision.js'
export type { Rates, RatesScope, RateLimiter, StackedRateLimiter, RatePolicy, ConsumeOptions, Identity, IdentityPrimitive } from './rates/rates.js'
export type { Algorithm, PenaltyOption, Policy } from './core/rates/types.js'
export {
  RatesError,
  RatesInvalidArgumentError,
  RatesPolicyConflictError,
  RatesUnavailableError,
  RatesStoppedError
} from './rates/errors.js'
export type { RatesErrorCode } from './rates/errors.js'

export default admissionPlugin
