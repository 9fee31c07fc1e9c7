import type { FastifyRequest } from 'fastify'
import type { Policy } from '../../core/rates/types.js'
import { partitionKeyOf, partitionKeyOption, type KeyDigest, type PartitionKey } from '../headers/partition-key.js'
import { AdmissionOptionError } from '../errors.js'
import type { RatesBackend } from '../../rates/backend.js'
import { capacityOfLimits, isTiers, limitsOption, type Limits } from './limits.js'
import { countOption, failedOption } from './login-options.js'
import { chargeOption } from './charge-option.js'
import { pressureSettings, queueDelaySettings } from '../../pressure/options.js'
import { metricsOption } from '../../metrics/options.js'
import { liveOption } from '../../live/options.js'
import { POLICY_SHAPE } from '../../rates/policy.js'
import { exactObject, optionalFunction as checkOptionalFunction, positiveInteger as checkPositiveInteger, stringList } from '../../validation/checks.js'
import { HEADER_FORMATS, type HeaderFormat } from '../headers/header-formats.js'
import { inFlightOption, priorityOption, routeInFlightOption } from './in-flight-options.js'
import { allowListOption, pluginAllowListOption } from './allow-list.js'
import { refusalOption } from './refusal-options.js'
import { retriesOption } from './retries-option.js'
import { offendersOption } from './offenders-option.js'
import { REMOVED_HINTS } from './removed-options.js'
import { builderOption } from './error-response.js'
import { booleanOption, groupIdOption, hookOption, skipsSheddingOption } from './route-choices.js'
import { PLUGIN_HINTS, ROUTE_HINTS } from './peer-options.js'
export type { AdmissionHook, AdmissionOptions, AdmissionRouteOptions, NamedRateLimitOptions, RateLimitOption, RateLimitOptions, RouteSettings, Settings, TieredRateLimitOptions } from './option-types.js'
import type { OnLimit, RouteSettings, Settings } from './option-types.js'

export const DEFAULT_RATE_LIMIT: Readonly<Policy> = Object.freeze({ algorithm: 'token-bucket', limit: 1000, windowMs: 60_000, burst: 1000 })
export const DEFAULT_IPV6_SUBNET = 56

const GATE_KEYS = ['maxInFlight', 'rateLimit', 'cost', 'hook', 'enforce', 'errorResponseBuilder', 'allowList', 'onBackendError'] as const
const ROUTE_KEYS = [...GATE_KEYS, 'priority', 'groupId', 'count', 'failed', 'charge', 'longLived', 'maxLongLived', 'clientInFlight'] as const
const PLUGIN_KEYS = [...GATE_KEYS, 'maxLongLived', 'permitWarningMs', 'refusal', 'headers', 'key', 'ipv6Subnet', 'backend', 'version', 'onShed', 'onLimit', 'pressure', 'queueDelay', 'metrics', 'retries', 'clientInFlight', 'offenders', 'live'] as const
// Keys that Fastify's own `register()` reads from the same object.
const REGISTER_KEYS = ['prefix', 'logLevel', 'logSerializers']

const complain = AdmissionOptionError.complain
const OPTIONS_SHAPE = { keys: [...PLUGIN_KEYS, ...REGISTER_KEYS], expected: 'an options object', nullPrototype: true, options: true, hints: { ...PLUGIN_HINTS, ...REMOVED_HINTS } }
const ROUTE_SHAPE = { keys: ROUTE_KEYS, expected: `an object { ${ROUTE_KEYS.map((key) => `${key}?`).join(', ')} } or false`, nullPrototype: true, options: true, hints: ROUTE_HINTS }

function positiveInteger (path: string, value: unknown): number {
  return checkPositiveInteger(complain, path, value)
}

function optionalFunction<F> (path: string, value: unknown): F | undefined {
  return checkOptionalFunction<F>(complain, path, value)
}

/** A bound that may be off: a positive safe integer, or false (the default) for none. */
function boundOrFalse (path: string, value: unknown, fallback: number | false = false): number | false {
  if (value === undefined) return fallback
  if (value === false) return false
  return checkPositiveInteger(complain, path, value, 'a positive safe integer or false')
}

export const DEFAULT_PERMIT_WARNING_MS = 60_000

/** A policy, a stack or tiers (limits.ts), in the rates capability's policy language; or false. */
function ratePolicy (path: string, value: unknown): Limits | false {
  if (value === false) return false
  return limitsOption(path, value)
}

function costWithin (path: string, value: unknown, limits: Limits | false | undefined): number {
  const cost = positiveInteger(path, value)
  if (limits && cost > capacityOfLimits(limits)) {
    throw new AdmissionOptionError(path, `at most the policy's capacity (${capacityOfLimits(limits)}${isTiers(limits) || !('algorithm' in limits) ? ', the least of its policies\'' : ''})`, cost)
  }
  return cost
}

// With `rateLimit: false` the plugin's cost is the default of routes that have a policy of their own.
function costOption (value: unknown, rateLimit: Limits | false): number {
  return value === undefined ? 1 : costWithin('cost', value, rateLimit)
}

function backendErrorPolicy (path: string, value: unknown, fallback: 'deny' | 'allow'): 'deny' | 'allow' {
  if (value === undefined) return fallback
  if (value !== 'deny' && value !== 'allow') throw new AdmissionOptionError(path, "'deny' or 'allow'", value)
  return value
}

function isBackend (value: unknown): value is RatesBackend {
  const candidate = value as Partial<RatesBackend> | null
  return typeof candidate === 'object' && candidate !== null && typeof candidate.kind === 'string' &&
    typeof candidate.limiter === 'function' && typeof candidate.stop === 'function'
}

function backendOption (value: unknown): RatesBackend | undefined {
  if (value === undefined) return undefined
  if (!isBackend(value)) throw new AdmissionOptionError('backend', 'a backend { kind, limiter(), stop() } such as memoryBackend() or redisBackend() make', value)
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

const HEADERS_EXPECTED = 'a boolean, or an object { format?, partitionKey? }'
const HEADERS_SHAPE = { keys: ['format', 'partitionKey'], expected: HEADERS_EXPECTED, nullPrototype: true }
const FORMATS_TEXT = `one of ${HEADER_FORMATS.map((format) => `'${format}'`).join(', ')} (the first is the default), or a list of them`

/** `headers.format`: one format, or a list of them (a migration period: both sets of fields at once). */
function formatOption (value: unknown): readonly HeaderFormat[] {
  const path = 'headers.format'
  const listed = Array.isArray(value)
  const formats = listed ? stringList(complain, path, value, FORMATS_TEXT, HEADER_FORMATS.length) : [value]
  if (formats.length === 0) throw new AdmissionOptionError(path, `${FORMATS_TEXT} (a list names at least one; headers: false sends none)`, value)
  formats.forEach((format, i) => {
    if (!(HEADER_FORMATS as readonly unknown[]).includes(format)) throw new AdmissionOptionError(listed ? `${path}[${i}]` : path, FORMATS_TEXT, format)
    if (formats.indexOf(format) !== i) throw new AdmissionOptionError(`${path}[${i}]`, 'a format the list does not name already', format)
  })
  // Both define `RateLimit`, each its own way: one field cannot say both.
  if (formats.includes('draft-7') && formats.includes('draft-11')) throw new AdmissionOptionError(path, "'draft-7' or 'draft-11', not both (each defines the RateLimit field its own way)", value)
  return Object.freeze(formats as HeaderFormat[])
}

const DEFAULT_FORMATS: readonly HeaderFormat[] = Object.freeze(['draft-11'])
const NO_FORMATS: readonly HeaderFormat[] = Object.freeze([])

/** `headers`: on (the default: draft 11's fields), off, or an object that says which formats and whether with `pk` (`{ format, partitionKey }`). */
function headersOption (value: unknown): { headers: boolean, formats: readonly HeaderFormat[], partitionKey: PartitionKey | undefined, keyDigest: KeyDigest | undefined } {
  if (value === undefined || value === true || value === false) return { headers: value !== false, formats: value === false ? NO_FORMATS : DEFAULT_FORMATS, partitionKey: undefined, keyDigest: undefined }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new AdmissionOptionError('headers', HEADERS_EXPECTED, value)
  const input = exactObject(complain, 'headers', value, HEADERS_SHAPE)
  // An object says something: `{}` is a typo for a key, not a way to write `true`.
  if (input.partitionKey === undefined && input.format === undefined) throw new AdmissionOptionError('headers.format', `${FORMATS_TEXT} (the object form of headers says a format or a partitionKey; headers: true sends the default fields)`, undefined)
  const formats = input.format === undefined ? DEFAULT_FORMATS : formatOption(input.format)
  if (input.partitionKey !== undefined && input.partitionKey !== false && !formats.includes('draft-11')) {
    throw new AdmissionOptionError('headers.partitionKey', "false or absent unless the formats include 'draft-11' (pk is a parameter of its RateLimit field)", undefined, { got: `a partitionKey with the formats ${formats.join(', ')}` })
  }
  const digest = input.partitionKey === undefined ? undefined : partitionKeyOption(input.partitionKey)
  return { headers: true, formats, partitionKey: digest === undefined ? undefined : partitionKeyOf(digest), keyDigest: digest }
}

/** The plugin's options, checked once at registration. */
export function validateOptions (options: unknown): Settings {
  const input = exactObject(complain, 'options', options ?? {}, OPTIONS_SHAPE)
  const rateLimit = input.rateLimit === undefined ? DEFAULT_RATE_LIMIT : ratePolicy('rateLimit', inherited('rateLimit', input.rateLimit, false))
  const refusal = refusalOption(input.refusal)
  const { headers, formats, partitionKey, keyDigest } = headersOption(input.headers)
  const ipv6Subnet = input.ipv6Subnet === undefined ? DEFAULT_IPV6_SUBNET : positiveInteger('ipv6Subnet', input.ipv6Subnet)
  if (ipv6Subnet > 128) throw new AdmissionOptionError('ipv6Subnet', 'a prefix length from 1 to 128', ipv6Subnet)
  const inFlight = inFlightOption('maxInFlight', input.maxInFlight)
  const key = keyOption(input.key)
  const hook = hookOption('hook', input.hook, 'onRequest', false)
  const { allowList, skipsShedding } = pluginAllowListOption(input.allowList, key !== undefined)
  return Object.freeze({
    maxInFlight: inFlight.limit,
    criticalReserve: inFlight.criticalReserve,
    maxLongLived: boundOrFalse('maxLongLived', input.maxLongLived),
    permitWarningMs: boundOrFalse('permitWarningMs', input.permitWarningMs, DEFAULT_PERMIT_WARNING_MS),
    rateLimit,
    cost: costOption(input.cost, rateLimit),
    ...refusal,
    errorResponseBuilder: builderOption('errorResponseBuilder', input.errorResponseBuilder),
    allowList,
    allowListSkipsShedding: skipsSheddingOption('allowList.skipsShedding', skipsShedding, hook),
    hook,
    enforce: booleanOption('enforce', input.enforce, true),
    headers,
    headerFormats: formats,
    partitionKey,
    keyDigest,
    key,
    ipv6Subnet,
    backend: backendOption(input.backend),
    onBackendError: backendErrorPolicy('onBackendError', input.onBackendError, 'deny'),
    version: versionOption(input.version),
    onShed: optionalFunction<(request: FastifyRequest) => void>('onShed', input.onShed),
    onLimit: optionalFunction<OnLimit>('onLimit', input.onLimit),
    pressure: pressureSettings(input.pressure),
    // `maxInFlight: 'auto'` is the no-tuning overload mode: the adaptive limit and queueing-delay shedding.
    queueDelay: queueDelaySettings(input.queueDelay === undefined && inFlight.auto ? true : input.queueDelay),
    metrics: metricsOption(input.metrics),
    retries: retriesOption(input.retries),
    clientInFlight: boundOrFalse('clientInFlight', input.clientInFlight),
    offenders: offendersOption(input.offenders),
    live: liveOption(input.live)
  })
}

const PLUGIN_POLICY_TEXT = "a policy whose every field is given (a route's policy takes the fields it leaves out from the plugin's rateLimit when that is one policy, and from the defaults when it is false; not from a list or tiers)"

/**
 * One policy with the fields it leaves out taken from `from` — the plugin's one policy for a
 * route's, as @fastify/rate-limit's route `max` takes the plugin's `timeWindow`; the defaults
 * (1000 per 60 000 ms) for the plugin's, and for a route's under `rateLimit: false`, as its `max`
 * and `timeWindow` default: `algorithm`, `limit` and `windowMs`, each when absent; `burst` only
 * with `from`'s `limit` (a policy that sets its own `limit` has its own default burst, that limit:
 * never a larger burst taken from elsewhere), and only for an algorithm that has one; `penalty`
 * unless it is given (`false`: none). A list, tiers, or `from` that is not one policy: as given.
 */
function inherited (path: string, value: unknown, plugin: Limits | false): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value) || Object.prototype.hasOwnProperty.call(value, 'tiers')) return value
  const { penalty: ownPenalty, ...own } = exactObject(complain, path, value, POLICY_SHAPE)
  const from = plugin === false ? DEFAULT_RATE_LIMIT : plugin
  if (!('algorithm' in from)) {
    const missing = ['limit', 'windowMs'].find((field) => own[field] === undefined)
    if (missing !== undefined) throw new AdmissionOptionError(`${path}.${missing}`, PLUGIN_POLICY_TEXT, undefined)
    return { ...own, ...penaltyField(ownPenalty) }
  }
  // Absent is `undefined` (exactObject drops it); a null is given, and refused as it stands.
  const take = (field: 'algorithm' | 'limit' | 'windowMs'): unknown => field in own ? own[field] : from[field]
  const algorithm = take('algorithm')
  const burst = 'burst' in own ? own.burst : !('limit' in own) && algorithm === from.algorithm ? from.burst : undefined
  const windowMs = take('windowMs')
  // The plugin's penalty; its longest block only with the plugin's window (else the default for the route's).
  const penalty = ownPenalty !== undefined ? ownPenalty : from.penalty === undefined ? undefined : windowMs === from.windowMs ? from.penalty : from.penalty.mode
  return { algorithm, limit: take('limit'), windowMs, ...(burst === undefined ? {} : { burst }), ...penaltyField(penalty) }
}

/** A policy's `penalty` field: none when absent or `false`. */
function penaltyField (penalty: unknown): { penalty?: unknown } {
  return penalty === undefined || penalty === false ? {} : { penalty }
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
  const rateLimit = input.rateLimit === undefined ? undefined : ratePolicy(`${path}.rateLimit`, inherited(`${path}.rateLimit`, input.rateLimit, plugin.rateLimit))
  const effective = rateLimit === undefined ? plugin.rateLimit : rateLimit
  // A route without a quota has nothing for a cost to take from: a cost there is a mistake.
  if (effective === false && input.cost !== undefined) {
    throw new AdmissionOptionError(`${path}.cost`, 'absent where there is no rate limit (a cost takes from a quota)', input.cost)
  }
  // A route that keeps the plugin's cost must still be able to pay it from its own bucket.
  const cost = costWithin(`${path}.cost`, input.cost === undefined ? plugin.cost : input.cost, effective)
  const hook = hookOption(`${path}.hook`, input.hook, plugin.hook, plugin.allowListSkipsShedding)
  const count = countOption(`${path}.count`, input.count)
  if (count === 'failures') {
    if (effective === false) throw new AdmissionOptionError(`${path}.count`, "'requests' where there is no rate limit (failures take from a quota)", count)
    if (isTiers(effective)) throw new AdmissionOptionError(`${path}.count`, "'requests' with tiers (login throttling counts against one quota)", count)
    if ('penalty' in effective && effective.penalty !== undefined) throw new AdmissionOptionError(`${path}.count`, "'requests' with a penalty (login throttling counts failures and refuses at its check: a penalty's block is for refusals counted)", count)
    if (input.groupId !== undefined) throw new AdmissionOptionError(`${path}.count`, "'requests' with a groupId (a group's routes count alike)", count)
  }
  const charge = chargeOption(`${path}.charge`, input.charge, effective, count)
  const inFlight = routeInFlightOption(`${path}.maxInFlight`, input.maxInFlight)
  return Object.freeze({
    // A route's own semaphore is a fixed limit (the adaptive limit is the plugin's).
    maxInFlight: inFlight.limit,
    observedWait: inFlight.observed,
    priority: priorityOption(`${path}.priority`, input.priority, plugin.maxInFlight !== false),
    rateLimit,
    cost,
    groupId: groupIdOption(`${path}.groupId`, input.groupId, effective),
    hook,
    enforce: booleanOption(`${path}.enforce`, input.enforce, plugin.enforce),
    errorResponseBuilder: builderOption(`${path}.errorResponseBuilder`, input.errorResponseBuilder) ?? plugin.errorResponseBuilder,
    allowList: allowListOption(`${path}.allowList`, input.allowList, plugin.key !== undefined) ?? plugin.allowList,
    onBackendError: backendErrorPolicy(`${path}.onBackendError`, input.onBackendError, plugin.onBackendError),
    count,
    failed: failedOption(`${path}.failed`, input.failed, count),
    charge,
    longLived: input.longLived === undefined ? undefined : booleanOption(`${path}.longLived`, input.longLived, false),
    maxLongLived: boundOrFalse(`${path}.maxLongLived`, input.maxLongLived),
    clientInFlight: input.clientInFlight === undefined ? undefined : boundOrFalse(`${path}.clientInFlight`, input.clientInFlight)
  })
}

