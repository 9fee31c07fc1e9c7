import type { FastifyRequest } from 'fastify'
import type { Algorithm, Policy } from '../core/rates/types.js'
import { AdmissionOptionError } from './errors.js'
import type { RatesBackend } from '../rates/backend.js'
import { capacityOf, normalizePolicy } from '../rates/policy.js'
import { pressureSettings, queueDelaySettings, type PressureOptions, type PressureSettings, type QueueDelayOptions, type QueueDelaySettings } from '../pressure/options.js'
import { metricsOption, type AdmissionMetricsOptions, type MetricsSettings } from '../metrics/options.js'
import { exactObject, optionalFunction as checkOptionalFunction, positiveInteger as checkPositiveInteger } from '../validation/checks.js'
import { criticalReserveOption, inFlightOption, priorityOption, type AdaptiveInFlightOptions, type AdaptiveSettings } from './in-flight-options.js'
import type { PriorityName } from './priority.js'
import { allowListOption, type AllowListOption, type AllowMatcher } from './allow-list.js'
import { builderOption, type ErrorResponseBuilder } from './error-response.js'
import { booleanOption, groupIdOption, hookOption, skipsSheddingOption } from './route-choices.js'

/**
 * A per-client rate limit in the rates capability's policy language. Default algorithm
 * `token-bucket`: `burst` tokens at most (default `limit`), refilled at `limit` per `windowMs`,
 * continuously to the millisecond.
 */
export interface RateLimitOptions {
  algorithm?: Algorithm
  limit: number
  windowMs: number
  /** Capacity of `token-bucket` and `gcra`; defaults to `limit`. */
  burst?: number
}

/** Where the rate check runs: `onRequest` (the default) or `preHandler`, after authentication (shedding stays in `onRequest`). */
export type AdmissionHook = 'onRequest' | 'preHandler'

/** What a route may override in `config.admission`. */
export interface AdmissionRouteOptions {
  /** A semaphore of this route's own, in addition to the global one; `false`: none (the default). */
  maxInFlight?: number | false
  /** This route's own buckets; `false`: no rate limit here; absent: the global buckets. */
  rateLimit?: RateLimitOptions | false
  /** Tokens one request takes; defaults to the plugin's `cost`. */
  cost?: number
  /**
   * This route's priority at the plugin's in-flight gate (default `'normal'`): under pressure
   * `sheddable` goes first, and `critical` keeps `criticalReserve` of the limit.
   */
  priority?: PriorityName
  /** Routes naming the same group share one quota (the route's `rateLimit`, else the plugin's; the same in every route of the group). */
  groupId?: string
  /** Where this route's rate check runs; defaults to the plugin's `hook`. */
  hook?: AdmissionHook
  /** `false`: shadow mode on this route; defaults to the plugin's `enforce`. */
  enforce?: boolean
  /** This route's refusals; defaults to the plugin's `errorResponseBuilder`. */
  errorResponseBuilder?: ErrorResponseBuilder
  /** This route's allow list, instead of the plugin's. */
  allowList?: AllowListOption
}

export interface AdmissionOptions {
  /**
   * Requests in flight at once before new ones are shed with 503; `false` (the default): no
   * shedding; `{ adaptive: true }`: a limit that follows the latency of the admitted requests.
   */
  maxInFlight?: number | false | AdaptiveInFlightOptions
  /** The share of the in-flight limit kept for `critical` routes (default 0.2; from 0 to below 1). */
  criticalReserve?: number
  /** The per-client rate limit; default `{ limit: 1000, windowMs: 60_000 }`; `false`: none. */
  rateLimit?: RateLimitOptions | false
  /** Tokens one request takes (default 1). */
  cost?: number
  /** Status of a rate-limited request: 429 (the default) or 503 (the seed's v1 wire format). */
  limitStatusCode?: 429 | 503
  /**
   * Body of a refusal: `'json'` (the default), `'text'` (`lim rejected`, 12 bytes) or `'problem'`
   * (RFC 9457 `application/problem+json` with the RateLimit draft's problem types).
   */
  responseBody?: 'json' | 'text' | 'problem'
  /** Builds the refusal (429 or 503) the application wants, sent through Fastify's error handling; `Retry-After` stays the gate's. */
  errorResponseBuilder?: ErrorResponseBuilder
  /** Clients that skip the rate limit: keys, IP addresses and CIDR ranges, or a synchronous `(request, key) => boolean`. */
  allowList?: AllowListOption
  /** Whether clients on the allow list skip shedding too (default false: a full server sheds everyone). */
  allowListSkipsShedding?: boolean
  /** Where the rate check runs: `'onRequest'` (the default) or `'preHandler'` (after authentication: `key(request)` can read `request.user`). */
  hook?: AdmissionHook
  /** `false`: shadow mode — decide, count, log and set headers, never refuse (default true). */
  enforce?: boolean
  /** Send `RateLimit-Policy` and `RateLimit` on limited routes (default true). */
  headers?: boolean
  /** The client's key; default: `request.ip`, IPv6 grouped by `ipv6Subnet`. */
  key?: (request: FastifyRequest) => string
  /** Prefix length that groups IPv6 clients (default 56). */
  ipv6Subnet?: number
  /**
   * Clients tracked at once per limiter by the default memory backend (default: the environment
   * variable `RATES_MAX_IDENTITIES`, else 1 000 000); live state is never evicted.
   */
  maxIdentities?: number
  /** Where quotas live; default `memoryBackend()`. */
  backend?: RatesBackend
  /**
   * When the backend cannot decide (Redis down or slow, memory full of live state): `'deny'`
   * (the default) answers 503 with `Retry-After`; `'allow'` admits. Both are counted as `unavailable`.
   */
  onBackendError?: 'deny' | 'allow'
  /**
   * Part of every quota's address: change it together with a policy to move to fresh quotas on a
   * shared backend (old keys expire by their TTL) instead of meeting the old policy there.
   * Letters, digits, `.`, `_` and `-`, at most 64.
   */
  version?: string
  onShed?: (request: FastifyRequest) => void
  onLimit?: (request: FastifyRequest, retryAfterMs: number) => void
  /** Shed on the process's signals, as @fastify/under-pressure (see the README's "Coming from @fastify/under-pressure"). */
  pressure?: PressureOptions
  /** Shed on the event loop's queueing delay (CoDel): `true` for the defaults (target 5 ms, interval 100 ms). */
  queueDelay?: boolean | QueueDelayOptions
  /** Prometheus metrics through prom-client (an optional peer, loaded only with this option); see the README's "Metrics and events". */
  metrics?: AdmissionMetricsOptions
}

export interface RouteSettings {
  readonly maxInFlight: number | false
  readonly priority: PriorityName
  /** `undefined`: the route uses the plugin's limiter (or its group's). */
  readonly rateLimit: Readonly<Policy> | false | undefined
  readonly cost: number
  readonly groupId: string | undefined
  readonly hook: AdmissionHook
  readonly enforce: boolean
  /** The route's builder, or the plugin's. */
  readonly errorResponseBuilder: ErrorResponseBuilder | undefined
  /** The route's allow list, or the plugin's. */
  readonly allowList: AllowMatcher | undefined
}

export interface Settings {
  readonly maxInFlight: number | false | AdaptiveSettings
  readonly criticalReserve: number
  readonly rateLimit: Readonly<Policy> | false
  readonly cost: number
  readonly limitStatusCode: 429 | 503
  readonly responseBody: 'json' | 'text' | 'problem'
  readonly errorResponseBuilder: ErrorResponseBuilder | undefined
  readonly allowList: AllowMatcher | undefined
  readonly allowListSkipsShedding: boolean
  readonly hook: AdmissionHook
  readonly enforce: boolean
  readonly headers: boolean
  readonly key: ((request: FastifyRequest) => string) | undefined
  readonly ipv6Subnet: number
  /** The backend given, or undefined for the default memory backend. */
  readonly backend: RatesBackend | undefined
  readonly maxIdentities: number | undefined
  readonly onBackendError: 'deny' | 'allow'
  readonly version: string | undefined
  readonly onShed: ((request: FastifyRequest) => void) | undefined
  readonly onLimit: ((request: FastifyRequest, retryAfterMs: number) => void) | undefined
  readonly pressure: PressureSettings | undefined
  readonly queueDelay: QueueDelaySettings | undefined
  readonly metrics: MetricsSettings | undefined
}

export const DEFAULT_RATE_LIMIT: Readonly<Policy> = Object.freeze({ algorithm: 'token-bucket', limit: 1000, windowMs: 60_000, burst: 1000 })
export const DEFAULT_IPV6_SUBNET = 56

const GATE_KEYS = ['maxInFlight', 'rateLimit', 'cost', 'hook', 'enforce', 'errorResponseBuilder', 'allowList'] as const
const ROUTE_KEYS = [...GATE_KEYS, 'priority', 'groupId'] as const
const PLUGIN_KEYS = [...GATE_KEYS, 'criticalReserve', 'allowListSkipsShedding', 'limitStatusCode', 'responseBody', 'headers', 'key', 'ipv6Subnet', 'maxIdentities', 'backend', 'onBackendError', 'version', 'onShed', 'onLimit', 'pressure', 'queueDelay', 'metrics'] as const
// Keys that Fastify's own `register()` reads from the same object.
const REGISTER_KEYS = ['prefix', 'logLevel', 'logSerializers']

const complain = AdmissionOptionError.complain
const OPTIONS_SHAPE = { keys: [...PLUGIN_KEYS, ...REGISTER_KEYS], expected: 'an options object', nullPrototype: true, options: true }
const ROUTE_SHAPE = { keys: ROUTE_KEYS, expected: `an object { ${ROUTE_KEYS.map((key) => `${key}?`).join(', ')} } or false`, nullPrototype: true, options: true }

function positiveInteger (path: string, value: unknown): number {
  return checkPositiveInteger(complain, path, value)
}

function optionalFunction<F> (path: string, value: unknown): F | undefined {
  return checkOptionalFunction<F>(complain, path, value)
}

/** A route's own semaphore: a fixed limit (the adaptive limit is the plugin's). */
function routeMaxInFlight (path: string, value: unknown): number | false {
  if (value === undefined || value === false) return false
  return checkPositiveInteger(complain, path, value, 'a positive safe integer or false')
}

/** The rates capability's validator, with the gate's default algorithm and error type. */
function ratePolicy (path: string, value: unknown): Readonly<Policy> | false {
  if (value === false) return false
  return normalizePolicy(value, path, { algorithm: 'token-bucket' }, complain)
}

function costWithin (path: string, value: unknown, policy: Readonly<Policy> | false | undefined): number {
  const cost = positiveInteger(path, value)
  if (policy && cost > capacityOf(policy)) {
    throw new AdmissionOptionError(path, `at most the policy's capacity (${capacityOf(policy)})`, cost)
  }
  return cost
}

// With `rateLimit: false` the plugin's cost is the default of routes that have a policy of their own.
function costOption (value: unknown, rateLimit: Readonly<Policy> | false): number {
  return value === undefined ? 1 : costWithin('cost', value, rateLimit)
}

function backendErrorPolicy (value: unknown): 'deny' | 'allow' {
  if (value === undefined) return 'deny'
  if (value !== 'deny' && value !== 'allow') throw new AdmissionOptionError('onBackendError', "'deny' or 'allow'", value)
  return value
}

function isBackend (value: unknown): value is RatesBackend {
  const candidate = value as Partial<RatesBackend> | null
  return typeof candidate === 'object' && candidate !== null && typeof candidate.kind === 'string' &&
    typeof candidate.limiter === 'function' && typeof candidate.stop === 'function'
}

function backendOption (value: unknown, maxIdentities: unknown): RatesBackend | undefined {
  if (value === undefined) return undefined
  if (!isBackend(value)) throw new AdmissionOptionError('backend', 'a backend { kind, limiter(), stop() } such as memoryBackend() or redisBackend() make', value)
  if (maxIdentities !== undefined) throw new AdmissionOptionError('maxIdentities', 'unset when `backend` is given (set it on the backend)', maxIdentities)
  return value
}

function versionOption (value: unknown): string | undefined {
  if (value === undefined) return undefined
  if (typeof value !== 'string' || !/^[A-Za-z0-9._-]{1,64}$/.test(value)) {
    throw new AdmissionOptionError('version', 'a string of 1 to 64 letters, digits, `.`, `_` or `-`', value)
  }
  return value
}

// The key is needed before the request may go on, on its own path: an async function's promise
// is not a key. (A plain function that returns a promise fails at the request, as any non-string.)
function keyOption (value: unknown): ((request: FastifyRequest) => string) | undefined {
  const key = optionalFunction<(request: FastifyRequest) => string>('key', value)
  if (key !== undefined && Object.prototype.toString.call(key) === '[object AsyncFunction]') {
    throw new AdmissionOptionError('key', 'a synchronous function (request) => string (an async function returns a promise, not a key)', value)
  }
  return key
}

/** The plugin's options, checked once at registration. */
export function validateOptions (options: unknown): Settings {
  const input = exactObject(complain, 'options', options ?? {}, OPTIONS_SHAPE)
  const rateLimit = input.rateLimit === undefined ? DEFAULT_RATE_LIMIT : ratePolicy('rateLimit', input.rateLimit)
  const statusCode = input.limitStatusCode === undefined ? 429 : input.limitStatusCode
  if (statusCode !== 429 && statusCode !== 503) throw new AdmissionOptionError('limitStatusCode', '429 or 503', statusCode)
  const body = input.responseBody === undefined ? 'json' : input.responseBody
  if (body !== 'json' && body !== 'text' && body !== 'problem') throw new AdmissionOptionError('responseBody', "'json', 'text' or 'problem'", body)
  const headers = input.headers === undefined ? true : input.headers
  if (typeof headers !== 'boolean') throw new AdmissionOptionError('headers', 'a boolean', headers)
  const ipv6Subnet = input.ipv6Subnet === undefined ? DEFAULT_IPV6_SUBNET : positiveInteger('ipv6Subnet', input.ipv6Subnet)
  if (ipv6Subnet > 128) throw new AdmissionOptionError('ipv6Subnet', 'a prefix length from 1 to 128', ipv6Subnet)
  const inFlight = inFlightOption('maxInFlight', input.maxInFlight)
  const key = keyOption(input.key)
  const hook = hookOption('hook', input.hook, 'onRequest', false)
  const allowList = allowListOption('allowList', input.allowList, key !== undefined)
  return Object.freeze({
    maxInFlight: inFlight,
    criticalReserve: criticalReserveOption(input.criticalReserve, inFlight !== false),
    rateLimit,
    cost: costOption(input.cost, rateLimit),
    limitStatusCode: statusCode,
    responseBody: body,
    errorResponseBuilder: builderOption('errorResponseBuilder', input.errorResponseBuilder),
    allowList,
    allowListSkipsShedding: skipsSheddingOption('allowListSkipsShedding', input.allowListSkipsShedding, allowList !== undefined, hook),
    hook,
    enforce: booleanOption('enforce', input.enforce, true),
    headers,
    key,
    ipv6Subnet,
    backend: backendOption(input.backend, input.maxIdentities),
    onBackendError: backendErrorPolicy(input.onBackendError),
    version: versionOption(input.version),
    maxIdentities: input.maxIdentities === undefined ? undefined : positiveInteger('maxIdentities', input.maxIdentities),
    onShed: optionalFunction<(request: FastifyRequest) => void>('onShed', input.onShed),
    onLimit: optionalFunction<(request: FastifyRequest, retryAfterMs: number) => void>('onLimit', input.onLimit),
    pressure: pressureSettings(input.pressure),
    queueDelay: queueDelaySettings(input.queueDelay),
    metrics: metricsOption(input.metrics)
  })
}

/**
 * A route's `config.admission`, checked with the same rules as the plugin's options; `false`
 * opts the route out. `where` names the route in messages. `plugin` supplies the limiter a route
 * without its own `rateLimit` uses, so that its `cost` is checked against that bucket.
 */
export function validateRouteOptions (value: unknown, where: string, plugin: Settings): RouteSettings | false {
  if (value === false) return false
  const path = `config.admission of ${where}`
  const input = exactObject(complain, path, value, ROUTE_SHAPE)
  const rateLimit = input.rateLimit === undefined ? undefined : ratePolicy(`${path}.rateLimit`, input.rateLimit)
  const effective = rateLimit === undefined ? plugin.rateLimit : rateLimit
  // A route without a quota has nothing for a cost to take from: a cost there is a mistake.
  if (effective === false && input.cost !== undefined) {
    throw new AdmissionOptionError(`${path}.cost`, 'absent where there is no rate limit (a cost takes from a quota)', input.cost)
  }
  // A route that keeps the plugin's cost must still be able to pay it from its own bucket.
  const cost = costWithin(`${path}.cost`, input.cost === undefined ? plugin.cost : input.cost, effective)
  const hook = hookOption(`${path}.hook`, input.hook, plugin.hook, plugin.allowListSkipsShedding)
  return Object.freeze({
    maxInFlight: routeMaxInFlight(`${path}.maxInFlight`, input.maxInFlight),
    priority: priorityOption(`${path}.priority`, input.priority, plugin.maxInFlight !== false),
    rateLimit,
    cost,
    groupId: groupIdOption(`${path}.groupId`, input.groupId, effective),
    hook,
    enforce: booleanOption(`${path}.enforce`, input.enforce, plugin.enforce),
    errorResponseBuilder: builderOption(`${path}.errorResponseBuilder`, input.errorResponseBuilder) ?? plugin.errorResponseBuilder,
    allowList: allowListOption(`${path}.allowList`, input.allowList, plugin.key !== undefined) ?? plugin.allowList
  })
}
