// The overload variants: one line each, a name and what it registers on the server. The next
// variant (an adaptive mode, say) is one more line. The servers run the package as built (dist/),
// through its public API only.
import type { FastifyInstance } from 'fastify'
import underPressure from '@fastify/under-pressure'
import admission from '../../dist/index.js'
import type { ModelName } from './work.js'

export interface VariantContext {
  model: ModelName
  /** The `maxInFlight` the sweep picked for this model (or OVERLOAD_GOOD). */
  goodMaxInFlight: number
}

export interface OverloadVariant {
  readonly name: string
  readonly description: string
  readonly register: (app: FastifyInstance, ctx: VariantContext) => PromiseLike<unknown> | void
  /** The plugin without an in-flight gate: a route's `priority` is refused there (it orders that gate). */
  readonly noInFlightGate?: true
}

export const VARIANTS: readonly OverloadVariant[] = [
  { name: 'none', description: 'no protection', register: () => {} },
  { name: 'up-default', description: '@fastify/under-pressure, defaults', register: (app) => app.register(underPressure) },
  { name: 'up-tuned', description: '@fastify/under-pressure, maxEventLoopDelay 50, maxEventLoopUtilization 0.98', register: (app) => app.register(underPressure, { maxEventLoopDelay: 50, maxEventLoopUtilization: 0.98 }) },
  { name: 'admission-good', description: 'fastify-admission, maxInFlight picked by the sweep', register: (app, ctx) => app.register(admission, { maxInFlight: ctx.goodMaxInFlight, rateLimit: false }) },
  { name: 'admission-256', description: 'fastify-admission, maxInFlight 256 (too high)', register: (app) => app.register(admission, { maxInFlight: 256, rateLimit: false }) },
  { name: 'admission-adaptive', description: 'fastify-admission, maxInFlight { adaptive: true } (no tuning)', register: (app) => app.register(admission, { maxInFlight: { adaptive: true }, rateLimit: false }) },
  { name: 'admission-codel', description: 'fastify-admission, queueDelay: true (CoDel on the event-loop delay, no tuning)', register: (app) => app.register(admission, { queueDelay: true, rateLimit: false }), noInFlightGate: true },
  { name: 'admission-auto', description: "fastify-admission, the no-tuning overload mode: maxInFlight: 'auto' (the adaptive limit and queueDelay)", register: (app) => app.register(admission, { maxInFlight: 'auto', rateLimit: false }) },
  { name: 'admission-auto-retry-aware', description: "fastify-admission, maxInFlight: 'auto' with the retry-aware options of OVERLOAD_RETRY_AWARE (JSON, merged into the plugin's options; unset: none, the same as admission-auto)", register: (app) => app.register(admission, { maxInFlight: 'auto', rateLimit: false, ...retryAwareOptions() }) },
  { name: 'admission-up', description: 'fastify-admission, pressure as up-tuned (maxEventLoopDelay 50, maxEventLoopUtilization 0.98)', register: (app) => app.register(admission, { pressure: { maxEventLoopDelay: 50, maxEventLoopUtilization: 0.98 }, rateLimit: false }), noInFlightGate: true }
]

/**
 * The hook for retry-aware shedding (issue 36, item 2): the options that turn it on, once the plugin
 * has them, from OVERLOAD_RETRY_AWARE (a JSON object, e.g. naming the attempt header the generator
 * sends, `Retry-Attempt`). Unset, nothing: a plugin that validates its options would refuse a key it
 * does not know yet, so none is guessed here.
 */
function retryAwareOptions (): Record<string, unknown> {
  const raw = process.env.OVERLOAD_RETRY_AWARE
  if (raw === undefined || raw.trim() === '') return {}
  const parsed: unknown = JSON.parse(raw)
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error(`OVERLOAD_RETRY_AWARE=${raw}: not a JSON object`)
  return parsed as Record<string, unknown>
}

/** The variant the sweep runs with each candidate `maxInFlight` as `goodMaxInFlight`. */
export const SWEPT_VARIANT = 'admission-good'

export function overloadVariant (name: string): OverloadVariant {
  const found = VARIANTS.find((v) => v.name === name)
  if (found === undefined) throw new Error(`unknown overload variant ${name}; known: ${VARIANTS.map((v) => v.name).join(', ')}`)
  return found
}
