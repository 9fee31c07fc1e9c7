import type { FastifyInstance, FastifyReply, FastifyRequest, RouteShorthandOptions } from 'fastify'
import { codelOptions, type CodelOptions } from '../core/index.js'
import { AdmissionOptionError } from '../validation/errors.js'
import { exactObject, numberInRange, optionalFunction, positiveInteger } from '../validation/checks.js'
import type { PressureReadings, Signal } from './signals.js'

/**
 * Shedding on the process's own signals, as @fastify/under-pressure 9 does, through this plugin's
 * 503 path. A signal is checked only when its limit is given; over its limit (strictly above, as
 * under-pressure compares), every gated request is answered 503 with `Retry-After`.
 */
export interface PressureOptions {
  /** Event-loop delay, ms: the mean over the last sample, as under-pressure computes it. */
  maxEventLoopDelay?: number
  /** Event-loop utilization over the last sample, in (0, 1). */
  maxEventLoopUtilization?: number
  /** `process.memoryUsage().heapUsed`, bytes. */
  maxHeapUsedBytes?: number
  /** `process.memoryUsage().rss`, bytes. */
  maxRssBytes?: number
  /** `Retry-After` of a pressure 503, seconds; default (and least) the sample interval rounded up. */
  retryAfter?: number
  /** How often the signals are read, ms (default 1000, at least 10: the delay histogram's resolution). */
  sampleInterval?: number
  /**
   * A route that answers whether the server is under pressure: `true` (`/status`), a URL, or
   * `{ url, routeOpts, routeSchemaOpts, expose }`. Anyone who can reach it reads what it exposes:
   * by default only `{ status }`; see `expose`.
   */
  exposeStatusRoute?: boolean | string | StatusRouteOptions
  /** An external check: falsy or a throw counts as unhealthy (a pressure signal); an object is merged into the status route's body. */
  healthCheck?: (fastify: FastifyInstance) => unknown
  /** How often `healthCheck` runs, ms; needed unless the status route calls it. */
  healthCheckInterval?: number
  /** Called instead of the 503 of a pressure signal, as under-pressure's: see docs/guides/pressure.md. */
  pressureHandler?: PressureHandler
  /** The source of readings (default: this process's): for tests, simulations or signals of your own. */
  readings?: () => PressureReadings
}

export type PressureHandler = (request: FastifyRequest, reply: FastifyReply, type: Signal, value: number | undefined) => unknown

export interface StatusRouteOptions {
  /** Default `/status`; one path (no `:` parameter, no `*` wildcard). */
  url?: string
  /**
   * What the body says. `'status'` (the default, as under-pressure's route answers): `{ status:
   * 'ok' }`, or `{ status: 'under-pressure' }` with a 503. `'details'`: also the reason (signal,
   * value, limit), the readings (event-loop delay and utilization, heap, RSS), the limits, the
   * counters and the object `healthCheck` answers — for a route only operators can reach.
   */
  expose?: 'status' | 'details'
  /** Route options of Fastify (not `url`, `method`, `handler` or `schema`). */
  routeOpts?: Omit<RouteShorthandOptions, 'schema' | 'config'> & { config?: Record<string, unknown> }
  /** The route's `schema`. */
  routeSchemaOpts?: Record<string, unknown>
}

/** Shedding on queueing delay (CoDel): `true` for the defaults. */
export interface QueueDelayOptions {
  /** The event-loop delay that may be exceeded only briefly, ms (default 5). */
  targetMs?: number
  /** How long the delay may stay above target before shedding starts, ms (default 100). */
  intervalMs?: number
  /** A monotonic clock in ms (default `performance.now`): for tests and simulations. */
  clock?: () => number
  /**
   * The event loop's utilization since the previous call, in [0, 1] (default: from
   * `performance.eventLoopUtilization`): for tests and simulations. It tells a standing accept
   * queue from an idle loop woken by each new connection.
   */
  utilization?: () => number
}

export interface PressureSettings {
  readonly limits: Readonly<Partial<Record<Signal, number>>>
  readonly retryAfter: number
  readonly sampleInterval: number
  readonly statusRoute: StatusRouteSettings | undefined
  readonly healthCheck: ((fastify: FastifyInstance) => unknown) | undefined
  readonly healthCheckInterval: number | undefined
  readonly pressureHandler: PressureHandler | undefined
  readonly readings: (() => PressureReadings) | undefined
}

export interface StatusRouteSettings {
  readonly url: string
  readonly routeOpts: Record<string, unknown>
  readonly schema: Record<string, unknown> | undefined
  readonly expose: 'status' | 'details'
}

export interface QueueDelaySettings {
  readonly codel: CodelOptions
  readonly clock: (() => number) | undefined
  readonly utilization: (() => number) | undefined
}

const complain = AdmissionOptionError.complain
const PRESSURE_KEYS = ['maxEventLoopDelay', 'maxEventLoopUtilization', 'maxHeapUsedBytes', 'maxRssBytes', 'retryAfter', 'sampleInterval',
  'exposeStatusRoute', 'healthCheck', 'healthCheckInterval', 'pressureHandler', 'readings'] as const
// @fastify/under-pressure's options that are not taken, and what each is here.
const PRESSURE_HINTS: Readonly<Record<string, string>> = Object.freeze({
  message: "@fastify/under-pressure's `message` is the plugin's `errorResponseBuilder` here (the body of every refusal), or `refusal` (a built-in body)",
  customError: "@fastify/under-pressure's `customError` is the plugin's `errorResponseBuilder` here (the body of every refusal), or `refusal` (a built-in body)",
  eventLoopUtilizationMode: "@fastify/under-pressure's `eventLoopUtilizationMode` is always 'interval' here: `maxEventLoopUtilization` reads the last sample"
})
const STATUS_HINTS: Readonly<Record<string, string>> = Object.freeze({
  routeResponseSchemaOpts: "@fastify/under-pressure's `routeResponseSchemaOpts` is `routeSchemaOpts: { response: { 200: … } }` here"
})
const PRESSURE_SHAPE = { keys: PRESSURE_KEYS, expected: 'an object of @fastify/under-pressure options', nullPrototype: true, options: true, hints: PRESSURE_HINTS }
const STATUS_SHAPE = { keys: ['url', 'routeOpts', 'routeSchemaOpts', 'expose'], expected: 'an object { url?, routeOpts?, routeSchemaOpts?, expose? }', nullPrototype: true, options: true, hints: STATUS_HINTS }
const QUEUE_SHAPE = { keys: ['targetMs', 'intervalMs', 'clock', 'utilization'], expected: 'true or an object { targetMs?, intervalMs?, clock?, utilization? }', nullPrototype: true, options: true }
/** Keys of a route that the status route sets itself. */
const OWN_ROUTE_KEYS = ['url', 'method', 'handler', 'schema']
/** The event-loop delay histogram's resolution, ms: a shorter sample interval would read nothing. */
export const DELAY_RESOLUTION = 10

function optionalInteger (path: string, value: unknown): number | undefined {
  return value === undefined ? undefined : positiveInteger(complain, path, value)
}

function plainObject (path: string, value: unknown): Record<string, unknown> {
  const keys = typeof value === 'object' && value !== null ? Reflect.ownKeys(value).filter((k): k is string => typeof k === 'string') : []
  return exactObject(complain, path, value, { keys, expected: 'a plain object', nullPrototype: true })
}

// A pattern would answer every path it matches (`/:section`: every unknown GET).
const PATTERN = /[:*]/
const ONE_PATH = 'no `:` parameter or `*` wildcard: the status route answers one path'

function statusRoute (value: unknown): StatusRouteSettings | undefined {
  const path = 'pressure.exposeStatusRoute'
  if (value === undefined || value === false) return undefined
  if (value === true) return { url: '/status', routeOpts: {}, schema: undefined, expose: 'status' }
  if (typeof value === 'string') {
    if (!value.startsWith('/') || PATTERN.test(value)) throw new AdmissionOptionError(path, `true, a URL starting with \`/\` (${ONE_PATH}), or an object { url?, routeOpts?, routeSchemaOpts?, expose? }`, value)
    return { url: value, routeOpts: {}, schema: undefined, expose: 'status' }
  }
  const input = exactObject(complain, path, value, STATUS_SHAPE)
  const url = input.url === undefined ? '/status' : input.url
  if (typeof url !== 'string' || !url.startsWith('/') || PATTERN.test(url)) throw new AdmissionOptionError(`${path}.url`, `a URL starting with \`/\` (${ONE_PATH})`, url)
  const routeOpts = input.routeOpts === undefined ? {} : plainObject(`${path}.routeOpts`, input.routeOpts)
  const own = OWN_ROUTE_KEYS.find((key) => key in routeOpts)
  if (own !== undefined) throw new AdmissionOptionError(`${path}.routeOpts.${own}`, 'absent (the status route sets it; the schema goes in routeSchemaOpts)', routeOpts[own])
  const config = routeOpts.config === undefined ? undefined : plainObject(`${path}.routeOpts.config`, routeOpts.config)
  if (config?.admission !== undefined) {
    throw new AdmissionOptionError(`${path}.routeOpts.config.admission`, 'absent (the status route is never gated by this plugin: a probe gets its answer, never a shed or a 429)', config.admission)
  }
  const schema = input.routeSchemaOpts === undefined ? undefined : plainObject(`${path}.routeSchemaOpts`, input.routeSchemaOpts)
  const expose = input.expose ?? 'status'
  if (expose !== 'status' && expose !== 'details') throw new AdmissionOptionError(`${path}.expose`, "'status' (whether the server is under pressure) or 'details' (also its readings, limits, counters and the health check's answer)", expose)
  return { url, routeOpts, schema, expose }
}

/** `pressure`, checked once at registration; undefined when absent. */
export function pressureSettings (value: unknown): PressureSettings | undefined {
  if (value === undefined) return undefined
  // `{}` (or options without a limit) samples and sheds nothing: `app.admission.pressure()` has the
  // readings, as under-pressure registered without options answers `memoryUsage()`.
  const input = exactObject(complain, 'pressure', value, PRESSURE_SHAPE)
  const limits: Partial<Record<Signal, number>> = {}
  const delay = optionalInteger('pressure.maxEventLoopDelay', input.maxEventLoopDelay)
  if (delay !== undefined) limits.eventLoopDelay = delay
  if (input.maxEventLoopUtilization !== undefined) limits.eventLoopUtilization = numberInRange(complain, 'pressure.maxEventLoopUtilization', input.maxEventLoopUtilization, 0, 1, 'a number above 0 and below 1', true, true)
  const heap = optionalInteger('pressure.maxHeapUsedBytes', input.maxHeapUsedBytes)
  if (heap !== undefined) limits.heapUsedBytes = heap
  const rss = optionalInteger('pressure.maxRssBytes', input.maxRssBytes)
  if (rss !== undefined) limits.rssBytes = rss
  const sampleInterval = optionalInteger('pressure.sampleInterval', input.sampleInterval) ?? 1000
  if (sampleInterval < DELAY_RESOLUTION) {
    throw new AdmissionOptionError('pressure.sampleInterval', `at least ${DELAY_RESOLUTION} ms (the event-loop delay histogram's resolution)`, sampleInterval)
  }
  const healthCheck = optionalFunction<(fastify: FastifyInstance) => unknown>(complain, 'pressure.healthCheck', input.healthCheck)
  const healthCheckInterval = optionalInteger('pressure.healthCheckInterval', input.healthCheckInterval)
  const route = statusRoute(input.exposeStatusRoute)
  if (healthCheckInterval !== undefined && healthCheck === undefined) {
    throw new AdmissionOptionError('pressure.healthCheckInterval', 'absent without a healthCheck (it is how often the healthCheck runs)', healthCheckInterval)
  }
  if (healthCheck !== undefined && healthCheckInterval === undefined && route === undefined) {
    throw new AdmissionOptionError('pressure.healthCheckInterval', 'set when healthCheck is given without exposeStatusRoute (otherwise the check never runs)', healthCheckInterval)
  }
  // A state read every sampleInterval cannot end sooner: a shorter Retry-After would be too early.
  const least = Math.ceil(Math.max(sampleInterval, healthCheckInterval ?? 0) / 1000)
  const retryAfter = optionalInteger('pressure.retryAfter', input.retryAfter) ?? least
  if (retryAfter < least) {
    throw new AdmissionOptionError('pressure.retryAfter', `at least ${least} s (the signals are read every ${Math.max(sampleInterval, healthCheckInterval ?? 0)} ms: a pressure cannot end sooner)`, retryAfter)
  }
  return Object.freeze({
    limits: Object.freeze(limits),
    retryAfter,
    sampleInterval,
    statusRoute: route,
    healthCheck,
    healthCheckInterval,
    pressureHandler: optionalFunction<PressureHandler>(complain, 'pressure.pressureHandler', input.pressureHandler),
    readings: optionalFunction<() => PressureReadings>(complain, 'pressure.readings', input.readings)
  })
}

/** `queueDelay`, checked once at registration; undefined when absent or false. */
export function queueDelaySettings (value: unknown): QueueDelaySettings | undefined {
  if (value === undefined || value === false) return undefined
  if (value === true) return Object.freeze({ codel: codelOptions(), clock: undefined, utilization: undefined })
  const input = exactObject(complain, 'queueDelay', value, QUEUE_SHAPE)
  const targetMs = optionalInteger('queueDelay.targetMs', input.targetMs)
  const intervalMs = optionalInteger('queueDelay.intervalMs', input.intervalMs)
  const codel = codelOptions({ targetMs, intervalMs })
  if (codel.targetMs >= codel.intervalMs) {
    throw new AdmissionOptionError('queueDelay.targetMs', `below intervalMs (${codel.intervalMs}): the delay may exceed the target for less than an interval`, codel.targetMs)
  }
  return Object.freeze({
    codel,
    clock: optionalFunction<() => number>(complain, 'queueDelay.clock', input.clock),
    utilization: optionalFunction<() => number>(complain, 'queueDelay.utilization', input.utilization)
  })
}
