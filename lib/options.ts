import type { FastifyRequest } from 'fastify'
import { AdmissionOptionError } from './errors.js'

/** A per-client token bucket: `burst` tokens at most, refilled at `limit` per `windowMs`, continuously. */
export interface RateLimitOptions {
  limit: number
  windowMs: number
  /** Tokens a client may spend at once; defaults to `limit`. */
  burst?: number
}

/** What a route may override in `config.admission`. */
export interface AdmissionRouteOptions {
  /** A semaphore of this route's own, in addition to the global one; `false`: none (the default). */
  maxInFlight?: number | false
  /** This route's own buckets; `false`: no rate limit here; absent: the global buckets. */
  rateLimit?: RateLimitOptions | false
  /** Tokens one request takes; defaults to the plugin's `cost`. */
  cost?: number
}

export interface AdmissionOptions {
  /** Requests in flight at once before new ones are shed with 503; `false` (the default): no shedding. */
  maxInFlight?: number | false
  /** The per-client rate limit; default `{ limit: 1000, windowMs: 60_000 }`; `false`: none. */
  rateLimit?: RateLimitOptions | false
  /** Tokens one request takes (default 1). */
  cost?: number
  /** Status of a rate-limited request: 429 (the default) or 503 (the seed's v1 wire format). */
  limitStatusCode?: 429 | 503
  /** Body of a refusal: `'json'` (the default) or `'text'` (`lim rejected`, 12 bytes). */
  responseBody?: 'json' | 'text'
  /** Send `RateLimit-Policy` and `RateLimit` on limited routes (default true). */
  headers?: boolean
  /** The client's key; default: `request.ip`, IPv6 grouped by `ipv6Subnet`. */
  key?: (request: FastifyRequest) => string
  /** Prefix length that groups IPv6 clients (default 56). */
  ipv6Subnet?: number
  /** Clients tracked at once per limiter (default 1 000 000); live buckets are never evicted. */
  maxIdentities?: number
  onShed?: (request: FastifyRequest) => void
  onLimit?: (request: FastifyRequest, retryAfterMs: number) => void
}

export interface RatePolicy {
  readonly limit: number
  readonly windowMs: number
  readonly burst: number
}

export interface RouteSettings {
  readonly maxInFlight: number | false
  /** `undefined`: the route uses the plugin's limiter. */
  readonly rateLimit: RatePolicy | false | undefined
  readonly cost: number
}

export interface Settings {
  readonly maxInFlight: number | false
  readonly rateLimit: RatePolicy | false
  readonly cost: number
  readonly limitStatusCode: 429 | 503
  readonly responseBody: 'json' | 'text'
  readonly headers: boolean
  readonly key: ((request: FastifyRequest) => string) | undefined
  readonly ipv6Subnet: number
  readonly maxIdentities: number
  readonly onShed: ((request: FastifyRequest) => void) | undefined
  readonly onLimit: ((request: FastifyRequest, retryAfterMs: number) => void) | undefined
}

export const DEFAULT_RATE_LIMIT: RatePolicy = Object.freeze({ limit: 1000, windowMs: 60_000, burst: 1000 })
export const DEFAULT_IPV6_SUBNET = 56
export const DEFAULT_MAX_IDENTITIES = 1_000_000

const GATE_KEYS = ['maxInFlight', 'rateLimit', 'cost'] as const
const PLUGIN_KEYS = [...GATE_KEYS, 'limitStatusCode', 'responseBody', 'headers', 'key', 'ipv6Subnet', 'maxIdentities', 'onShed', 'onLimit'] as const
// Keys that Fastify's own `register()` reads from the same object.
const REGISTER_KEYS = ['prefix', 'logLevel', 'logSerializers']
const RATE_KEYS = ['limit', 'windowMs', 'burst'] as const

type Reader = Record<string, unknown>

function plainObject (path: string, value: unknown, expected: string): Reader {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new AdmissionOptionError(path, expected, value)
  const proto = Object.getPrototypeOf(value)
  if (proto !== Object.prototype && proto !== null) throw new AdmissionOptionError(path, expected, value)
  return value as Reader
}

function knownKeys (path: string, object: Reader, known: readonly string[]): void {
  for (const key of Reflect.ownKeys(object)) {
    if (typeof key === 'symbol' || !known.includes(key)) {
      throw new AdmissionOptionError(`${path}.${String(key)}`, `one of ${known.join(', ')} (unknown option)`, object[key as string])
    }
  }
}

function positiveInteger (path: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    throw new AdmissionOptionError(path, 'a positive safe integer', value)
  }
  return value
}

function maxInFlight (path: string, value: unknown, fallback: number | false): number | false {
  if (value === undefined) return fallback
  if (value === false) return false
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    throw new AdmissionOptionError(path, 'a positive safe integer or false', value)
  }
  return value
}

function ratePolicy (path: string, value: unknown): RatePolicy | false {
  if (value === false) return false
  const input = plainObject(path, value, 'an object { limit, windowMs, burst? } or false')
  knownKeys(path, input, RATE_KEYS)
  const limit = positiveInteger(`${path}.limit`, input.limit)
  const windowMs = positiveInteger(`${path}.windowMs`, input.windowMs)
  const burst = input.burst === undefined ? limit : positiveInteger(`${path}.burst`, input.burst)
  // The bucket counts in 1/windowMs of a token so that refill is whole units per millisecond;
  // its capacity must stay exact.
  if (burst * windowMs > Number.MAX_SAFE_INTEGER) {
    throw new AdmissionOptionError(`${path}.burst`, `at most ${Math.floor(Number.MAX_SAFE_INTEGER / windowMs)} with windowMs ${windowMs} (burst × windowMs must be a safe integer)`, burst)
  }
  return Object.freeze({ limit, windowMs, burst })
}

function costWithin (path: string, value: unknown, policy: RatePolicy | false | undefined): number {
  const cost = positiveInteger(path, value)
  if (policy && cost > policy.burst) {
    throw new AdmissionOptionError(path, `at most the bucket's capacity (burst ${policy.burst})`, cost)
  }
  return cost
}

function optionalFunction<F> (path: string, value: unknown): F | undefined {
  if (value === undefined) return undefined
  if (typeof value !== 'function') throw new AdmissionOptionError(path, 'a function', value)
  return value as F
}

/** The plugin's options, checked once at registration. */
export function validateOptions (options: unknown): Settings {
  const input = plainObject('options', options ?? {}, 'an options object')
  knownKeys('options', input, [...PLUGIN_KEYS, ...REGISTER_KEYS])
  const rateLimit = input.rateLimit === undefined ? DEFAULT_RATE_LIMIT : ratePolicy('rateLimit', input.rateLimit)
  const statusCode = input.limitStatusCode === undefined ? 429 : input.limitStatusCode
  if (statusCode !== 429 && statusCode !== 503) throw new AdmissionOptionError('limitStatusCode', '429 or 503', statusCode)
  const body = input.responseBody === undefined ? 'json' : input.responseBody
  if (body !== 'json' && body !== 'text') throw new AdmissionOptionError('responseBody', "'json' or 'text'", body)
  const headers = input.headers === undefined ? true : input.headers
  if (typeof headers !== 'boolean') throw new AdmissionOptionError('headers', 'a boolean', headers)
  const ipv6Subnet = input.ipv6Subnet === undefined ? DEFAULT_IPV6_SUBNET : positiveInteger('ipv6Subnet', input.ipv6Subnet)
  if (ipv6Subnet > 128) throw new AdmissionOptionError('ipv6Subnet', 'a prefix length from 1 to 128', ipv6Subnet)
  return Object.freeze({
    maxInFlight: maxInFlight('maxInFlight', input.maxInFlight, false),
    rateLimit,
    cost: input.cost === undefined ? 1 : costWithin('cost', input.cost, rateLimit),
    limitStatusCode: statusCode,
    responseBody: body,
    headers,
    key: optionalFunction<(request: FastifyRequest) => string>('key', input.key),
    ipv6Subnet,
    maxIdentities: input.maxIdentities === undefined ? DEFAULT_MAX_IDENTITIES : positiveInteger('maxIdentities', input.maxIdentities),
    onShed: optionalFunction<(request: FastifyRequest) => void>('onShed', input.onShed),
    onLimit: optionalFunction<(request: FastifyRequest, retryAfterMs: number) => void>('onLimit', input.onLimit)
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
  const input = plainObject(path, value, 'an object { maxInFlight?, rateLimit?, cost? } or false')
  knownKeys(path, input, GATE_KEYS)
  const rateLimit = input.rateLimit === undefined ? undefined : ratePolicy(`${path}.rateLimit`, input.rateLimit)
  const effective = rateLimit === undefined ? plugin.rateLimit : rateLimit
  // A route that keeps the plugin's cost must still be able to pay it from its own bucket.
  const cost = costWithin(`${path}.cost`, input.cost === undefined ? plugin.cost : input.cost, effective)
  return Object.freeze({
    maxInFlight: maxInFlight(`${path}.maxInFlight`, input.maxInFlight, false),
    rateLimit,
    cost
  })
}
