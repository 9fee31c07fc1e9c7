import { types } from 'node:util'
import { adaptiveLimitOptions, type AdaptiveLimitOptions } from '../../core/adaptive/limit.js'
import { exactObject, numberInRange, positiveInteger } from '../../validation/checks.js'
import { AdmissionOptionError } from '../errors.js'
import { DEFAULT_CRITICAL_RESERVE, PRIORITY_NAMES, type PriorityName } from '../release/priority.js'

/**
 * `maxInFlight: { limit, criticalReserve }`: a fixed limit (or `'auto'`, the no-tuning overload
 * mode) with the share of it kept for `critical` routes.
 */
export interface FixedInFlightOptions {
  limit: number | 'auto'
  /** The share of the limit kept for `critical` routes (default 0.2; from 0 to below 1). */
  criticalReserve?: number
}

/**
 * `maxInFlight: { adaptive: true }`: the limit follows the latency of the requests it admits
 * (the core's `lib/core/adaptive/limit.ts`). Everything else is optional and starts sane.
 */
export interface AdaptiveInFlightOptions {
  adaptive: true
  /** The share of the limit kept for `critical` routes (default 0.2; from 0 to below 1). */
  criticalReserve?: number
  /** The lowest limit (default 1). */
  min?: number
  /** The highest limit (default 1000). */
  max?: number
  /** The limit before the first sample (default 20, clamped into [min, max]). */
  initial?: number
  /** How much slower than the no-load latency a response may be before it counts as queueing (default 1.5; 1 to 10). */
  tolerance?: number
  /** How long queueing may go on before the no-load latency is measured again, ms (default 2 000). */
  probeIntervalMs?: number
}

/**
 * `maxInFlight: { fleet: 400 }`: at most that many requests in flight across every process of the
 * fleet (on a backend shared by them: Redis). Each live process enforces its share, the shares
 * rebalanced as processes join, leave or die; membership is refreshed on a timer, never per request.
 * With `adaptive: true` (and the adaptive options), a process's limit is the smaller of its share
 * and the adaptive limit.
 */
export interface FleetInFlightOptions {
  fleet: number
  /** The share of this process's limit kept for `critical` routes (default 0.2; from 0 to below 1). */
  criticalReserve?: number
  /** How often each process renews its membership and reads the fleet's, ms (default 1 000; 50 to 60 000). */
  refreshMs?: number
  adaptive?: true
  min?: number
  max?: number
  initial?: number
  tolerance?: number
  probeIntervalMs?: number
}

/** The validated fleet option: the fleet's limit, the refresh period, an entry's TTL, and the adaptive limit when asked for. */
export interface FleetSettings {
  readonly fleet: number
  readonly refreshMs: number
  /** A member's entry lapses this long after its last refresh: three refreshes. */
  readonly ttlMs: number
  readonly adaptive: AdaptiveSettings | undefined
}

/** Whether the plugin's in-flight setting is a fleet's. */
export function isFleet (value: number | false | AdaptiveSettings | FleetSettings): value is FleetSettings {
  return typeof value === 'object' && 'fleet' in value
}

/** The validated adaptive option: the core's parameters, frozen. */
export interface AdaptiveSettings {
  readonly adaptive: true
  readonly limit: AdaptiveLimitOptions
}

const complain = AdmissionOptionError.complain
const EXPECTED = "'auto', a positive safe integer or false, { limit, criticalReserve? }, { adaptive: true, min?, max?, initial?, tolerance?, probeIntervalMs?, criticalReserve? } or { fleet, refreshMs?, adaptive?, …, criticalReserve? }"
const ADAPTIVE_KEYS = ['adaptive', 'min', 'max', 'initial', 'tolerance', 'probeIntervalMs']
const ADAPTIVE_SHAPE = { keys: [...ADAPTIVE_KEYS, 'criticalReserve'], expected: '{ adaptive: true, min?, max?, initial?, tolerance?, probeIntervalMs?, criticalReserve? }', nullPrototype: true, options: true }
const FIXED_SHAPE = { keys: ['limit', 'criticalReserve'], expected: '{ limit, criticalReserve? }', nullPrototype: true, options: true }
const DEFAULTS = adaptiveLimitOptions()
/**
 * The gate feeds the controller one sample per window of a round trip, each already a mean of
 * several responses (release/adaptive-sampler.ts), so its short-term RTT may move faster than the core's
 * per-response default (0.1): at 0.1 per window, the RTT took 2-3 s to fall back after the step's
 * slowdown ended, and the limit, which does not grow while the RTT falls, shed a quarter of 0.8 C meanwhile.
 */
export const WINDOW_FAST_WEIGHT = 0.3

function adaptiveOption (path: string, value: object): AdaptiveSettings {
  const input = exactObject(complain, path, value, ADAPTIVE_SHAPE)
  if (input.adaptive !== true) throw new AdmissionOptionError(`${path}.adaptive`, 'true (a fixed limit is a number)', input.adaptive)
  const min = input.min === undefined ? DEFAULTS.min : positiveInteger(complain, `${path}.min`, input.min)
  const max = input.max === undefined ? DEFAULTS.max : positiveInteger(complain, `${path}.max`, input.max)
  if (max < min) {
    throw input.max === undefined
      ? new AdmissionOptionError(`${path}.min`, `at most max (${max}, the default)`, min)
      : new AdmissionOptionError(`${path}.max`, `at least min (${min})`, max)
  }
  const initial = input.initial === undefined ? Math.min(max, Math.max(min, DEFAULTS.initial)) : positiveInteger(complain, `${path}.initial`, input.initial)
  if (initial < min || initial > max) throw new AdmissionOptionError(`${path}.initial`, `from min to max (${min} to ${max})`, initial)
  const tolerance = input.tolerance === undefined ? DEFAULTS.tolerance : numberInRange(complain, `${path}.tolerance`, input.tolerance, 1, 10, 'a number from 1 to 10')
  const probeIntervalMs = input.probeIntervalMs === undefined ? DEFAULTS.probeIntervalMs : positiveInteger(complain, `${path}.probeIntervalMs`, input.probeIntervalMs)
  return Object.freeze({ adaptive: true, limit: adaptiveLimitOptions({ min, max, initial, tolerance, probeIntervalMs, fastWeight: WINDOW_FAST_WEIGHT }) })
}

const FLEET_SHAPE = { keys: ['fleet', 'refreshMs', ...ADAPTIVE_SHAPE.keys], expected: '{ fleet, refreshMs?, adaptive?, min?, max?, initial?, tolerance?, probeIntervalMs?, criticalReserve? }', nullPrototype: true, options: true }
const DEFAULT_REFRESH_MS = 1000

function fleetOption (path: string, value: object): FleetSettings {
  const input = exactObject(complain, path, value, FLEET_SHAPE)
  const fleet = positiveInteger(complain, `${path}.fleet`, input.fleet, 'a positive safe integer: requests in flight at once across every process of the fleet')
  const refreshMs = input.refreshMs === undefined ? DEFAULT_REFRESH_MS : numberInRange(complain, `${path}.refreshMs`, input.refreshMs, 50, 60_000, 'an integer from 50 to 60000 (ms)')
  if (!Number.isInteger(refreshMs)) throw new AdmissionOptionError(`${path}.refreshMs`, 'an integer from 50 to 60000 (ms)', refreshMs)
  const { fleet: _fleet, refreshMs: _refresh, criticalReserve: _reserve, ...rest } = input
  const adaptiveKeys = Object.keys(rest).filter((key) => (rest as Record<string, unknown>)[key] !== undefined)
  let adaptive: AdaptiveSettings | undefined
  if (input.adaptive !== undefined || adaptiveKeys.length > 0) {
    if (input.adaptive !== true) throw new AdmissionOptionError(`${path}.adaptive`, `true with the adaptive options (${adaptiveKeys.join(', ')}), or absent without them`, input.adaptive)
    adaptive = adaptiveOption(path, rest)
  }
  return Object.freeze({ fleet, refreshMs, ttlMs: 3 * refreshMs, adaptive })
}

/** The plugin's in-flight gate: its limit, the share of it kept for `critical` routes, and whether it is `'auto'`. */
export interface InFlightChoice {
  readonly limit: number | false | AdaptiveSettings | FleetSettings
  readonly criticalReserve: number
  /** The no-tuning overload mode: the registration adds queueing-delay shedding unless `queueDelay` says otherwise. */
  readonly auto: boolean
}

const has = (value: unknown, key: string): boolean => typeof value === 'object' && value !== null && !types.isProxy(value) && Object.hasOwn(value, key)

/**
 * The plugin's `maxInFlight`: a fixed limit, `false` (no shedding, the default), the adaptive
 * one, or a fleet's; `'auto'` is the adaptive one with its defaults. An object form may say
 * `criticalReserve`, the share of the limit kept for `critical` routes: a share of that limit,
 * so it is written with it (`{ limit: 100, criticalReserve: 0.1 }`).
 */
export function inFlightOption (path: string, value: unknown): InFlightChoice {
  if (value === undefined || value === false) return { limit: false, criticalReserve: 0, auto: false }
  if (value === 'auto') return { limit: adaptiveOption(path, { adaptive: true }), criticalReserve: DEFAULT_CRITICAL_RESERVE, auto: true }
  if (has(value, 'limit')) {
    const input = exactObject(complain, path, value, FIXED_SHAPE)
    const auto = input.limit === 'auto'
    const limit = auto ? adaptiveOption(path, { adaptive: true }) : positiveInteger(complain, `${path}.limit`, input.limit, "a positive safe integer or 'auto'")
    return { limit, criticalReserve: criticalReserveOption(`${path}.criticalReserve`, input.criticalReserve), auto }
  }
  // An object that says `adaptive` (or a Proxy, which the toolkit refuses unread) is the adaptive
  // option; any other value is a number that is not one. The form's own check has read the object
  // (no getter, no Proxy), so its `criticalReserve` is a plain data property.
  const limit = has(value, 'fleet')
    ? fleetOption(path, value as object)
    : typeof value === 'object' && value !== null && (types.isProxy(value) || Object.hasOwn(value, 'adaptive'))
      ? adaptiveOption(path, value)
      : positiveInteger(complain, path, value, EXPECTED)
  const reserve = typeof limit === 'object' ? (Object.getOwnPropertyDescriptor(value as object, 'criticalReserve')?.value as unknown) : undefined
  return { limit, criticalReserve: criticalReserveOption(`${path}.criticalReserve`, reserve), auto: false }
}

/** The share of the in-flight limit kept for `critical` routes: in [0, 1). */
function criticalReserveOption (path: string, value: unknown): number {
  if (value === undefined) return DEFAULT_CRITICAL_RESERVE
  return numberInRange(complain, path, value, 0, 1, 'a share of the in-flight limit, from 0 to below 1', true)
}

/** A route's own semaphore: its limit (false for none), and whether a full one advertises its observed wait. */
export interface RouteInFlight {
  readonly limit: number | false
  readonly observed: boolean
}

const ROUTE_SHAPE = { keys: ['limit', 'retryAfter'], expected: "{ limit, retryAfter?: 'observed' }", nullPrototype: true, options: true }
const ROUTE_EXPECTED = "a positive safe integer, false, or { limit, retryAfter?: 'observed' }"

/**
 * A route's `maxInFlight`: a number, `false` (none, the default), or `{ limit, retryAfter:
 * 'observed' }` — a full semaphore then says `Retry-After` from the route's observed duration and
 * its oldest permit's age instead of the constant 1 (a fixed limit of its own: the adaptive one is the plugin's).
 */
export function routeInFlightOption (path: string, value: unknown): RouteInFlight {
  if (value === undefined || value === false) return { limit: false, observed: false }
  // The object form says its `limit` or `retryAfter`; any other value is a number that is not one.
  if (!has(value, 'limit') && !has(value, 'retryAfter')) return { limit: positiveInteger(complain, path, value, ROUTE_EXPECTED), observed: false }
  const input = exactObject(complain, path, value, ROUTE_SHAPE)
  const limit = positiveInteger(complain, `${path}.limit`, input.limit)
  if (input.retryAfter !== undefined && input.retryAfter !== 'observed') {
    throw new AdmissionOptionError(`${path}.retryAfter`, "'observed' (the wait from the route's observed duration) or absent (the constant 1)", input.retryAfter)
  }
  return { limit, observed: input.retryAfter === 'observed' }
}

/** A route's `priority`: only where the plugin has a global in-flight gate for it to act on. */
export function priorityOption (path: string, value: unknown, gated: boolean): PriorityName {
  if (value === undefined) return 'normal'
  if (!(PRIORITY_NAMES as readonly unknown[]).includes(value)) throw new AdmissionOptionError(path, "'critical', 'normal' or 'sheddable'", value)
  if (!gated) throw new AdmissionOptionError(path, "unset when the plugin has no `maxInFlight` (a priority orders the plugin's in-flight gate)", value)
  return value as PriorityName
}
