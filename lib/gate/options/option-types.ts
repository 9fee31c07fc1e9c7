import type { KeyDigest, PartitionKey } from '../headers/partition-key.js'
import type { OffendersOptions, OffendersSettings } from './offenders-option.js'
import type { HeaderFormat } from '../headers/header-formats.js'

export type { HeaderFormat }

/** `headers: { format, partitionKey }`: which fields clients read, and draft 11's `pk`. */
export interface HeadersOptions {
  /** `'draft-11'` (the default), `'draft-7'`, `'draft-6'`, `'x-ratelimit'`, or a list of them (not `'draft-7'` with `'draft-11'`). */
  format?: HeaderFormat | readonly HeaderFormat[]
  /** `pk` on draft 11's `RateLimit` items: `true` (a secret drawn at registration) or a secret string. */
  partitionKey?: boolean | string
}
import type { FastifyRequest } from 'fastify'
import type { Algorithm, PenaltyOption, Policy } from '../../core/rates/types.js'
import type { RatesBackend } from '../../rates/backend.js'
import type { PressureOptions, PressureSettings, QueueDelayOptions, QueueDelaySettings } from '../../pressure/options.js'
import type { AdmissionMetricsOptions, MetricsSettings } from '../../metrics/options.js'
import type { AdaptiveInFlightOptions, AdaptiveSettings, FixedInFlightOptions, FleetInFlightOptions, FleetSettings } from './in-flight-options.js'
import type { PriorityName } from '../release/priority.js'
import type { AllowListOption, SheddingAllowListOptions, AllowMatcher } from './allow-list.js'
import type { RefusalBody, RefusalOptions } from './refusal-options.js'
import type { ErrorResponseBuilder } from './error-response.js'
import type { Limits } from './limits.js'
import type { CountMode, FailedResponse } from './login-options.js'
import type { ChargeCallback } from './charge-option.js'
import type { RetriesOptions, RetrySettings } from './retries-option.js'
import type { LiveOptions, LiveSettings } from '../../live/options.js'

// The shapes of the plugin's options (what an application writes) and of its settings (what
// validation makes of them); the checks are in options.ts.


/**
 * `onLimit(request, retryAfterMs, key)`: a request refused by its quota, the wait it was told, and
 * the client's key (`key(request)`, or the grouped address). A key may be a credential (an API
 * key): log a part of it or a hash, not the whole.
 */
export type OnLimit = (request: FastifyRequest, retryAfterMs: number, key: string) => void

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
  /**
   * Refusals block: `'restart'` (each refused request blocks one window from it, as
   * @fastify/rate-limit's `continueExceeding`), `'double'` (each doubles the block, at most `maxMs`,
   * default 64 windows: its `exponentialBackoff`, bounded). A single policy (of the plugin, a route or a tier), not one of a list.
   */
  penalty?: PenaltyOption
}

/**
 * The plugin's or a route's one policy, whose every field may be left out: a route's takes the
 * plugin's one policy's, and the plugin's (or a route's under `rateLimit: false`) the defaults —
 * 1000 per 60 000 ms, a token bucket — as @fastify/rate-limit's `max` and `timeWindow` default.
 * `penalty: false`: none (a route's way to drop the plugin's penalty).
 */
export type OnePolicyOptions = Partial<Omit<RateLimitOptions, 'penalty'>> & { penalty?: PenaltyOption | false }

/** A policy of a stack, with the name the `RateLimit` headers list it under (default `per-<w>s`). */
export type NamedRateLimitOptions = Omit<RateLimitOptions, 'penalty'> & { name?: string }

/**
 * Tiers: several limits declared at registration, one picked per request by `tier(request)` (a
 * synchronous function returning one of the names). Each tier has its own quota, headers and counters.
 */
export interface TieredRateLimitOptions {
  tiers: Record<string, RateLimitOptions | NamedRateLimitOptions[]>
  tier: (request: FastifyRequest) => string
}

/**
 * A rate limit: one policy; a list of policies decided as one (a stack: a request passes only
 * when every one has room, and when one refuses none consumes); or tiers.
 */
export type RateLimitOption = RateLimitOptions | NamedRateLimitOptions[] | TieredRateLimitOptions

/** Where the rate check runs: `onRequest` (the default) or `preHandler`, after authentication (shedding stays in `onRequest`). */
export type AdmissionHook = 'onRequest' | 'preHandler'

/** What a route may override in `config.admission`. */
export interface AdmissionRouteOptions {
  /**
   * A semaphore of this route's own, in addition to the global one; `false`: none (the default).
   * `{ limit, retryAfter: 'observed' }`: a full one says `Retry-After` from the route's observed
   * duration and its oldest permit's age (at most 60 s) instead of the constant 1.
   */
  maxInFlight?: number | false | { limit: number, retryAfter?: 'observed' }
  /**
   * This route's own buckets; `false`: no rate limit here; absent: the global buckets. One policy
   * takes the fields it leaves out from the plugin's one policy (`{ limit: 6 }`: the plugin's
   * `windowMs` and `algorithm`; `burst` only with the plugin's `limit`; its `penalty` unless
   * `penalty: false`), or from the defaults under `rateLimit: false`; a list or tiers are complete.
   */
  rateLimit?: OnePolicyOptions | NamedRateLimitOptions[] | TieredRateLimitOptions | false
  /** Tokens one request takes; defaults to the plugin's `cost`. */
  cost?: number
  /**
   * This route's priority at the plugin's in-flight gate (default `'normal'`): under pressure
   * `sheddable` goes first, and `critical` keeps the plugin's `maxInFlight.criticalReserve` of it.
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
  /** When the backend cannot decide for this route: defaults to the plugin's `onBackendError`. */
  onBackendError?: 'deny' | 'allow'
  /**
   * `'failures'`: login throttling — a request passes while its client's quota has room, taking
   * nothing; a failed response (`failed`, default: a 4xx) takes `cost` from it. Default `'requests'`.
   */
  count?: CountMode
  /** With `count: 'failures'`: whether a response is a failure (synchronous); default a 4xx status. */
  failed?: FailedResponse
  /**
   * Charging after the response: the units this request really took (tokens generated, bytes,
   * rows), known once its work is done. The request takes `cost` up front (its estimate); when its
   * response ends, the difference is charged to the quota that admitted it — more may put the
   * client into debt, refused with an honest `Retry-After` until repaid; less gives units back.
   * A safe integer from 0 to the quota's capacity, or a promise of one.
   */
  charge?: ChargeCallback
  /**
   * `true`: this route's replies are long-lived (streams, long downloads): a reply below 300 gives
   * its in-flight permit back once its headers are out, and its connection is counted as
   * long-lived until it closes. `false`: never, not even on a websocket or @fastify/sse route.
   * Default: websocket upgrades and event streams are recognised (docs/guides/long-lived.md).
   */
  longLived?: boolean
  /** At most this many of this route's long-lived connections at once (a 503 beyond); default: no bound of the route's own. */
  maxLongLived?: number | false
  /** At most this many of a client's requests to this route in flight at once (a 429 beyond); defaults to the plugin's `clientInFlight`; `false`: none here. */
  clientInFlight?: number | false
}

export interface AdmissionOptions {
  /**
   * Requests in flight at once before new ones are shed with 503; `false` (the default): no
   * shedding; `{ adaptive: true }`: a limit that follows the latency of the admitted requests;
   * `'auto'`: the no-tuning overload mode — that adaptive limit and `queueDelay: true` (unless
   * `queueDelay` is given); `{ fleet }`: a limit for the whole fleet. An object form takes
   * `criticalReserve`, the share of the limit kept for `critical` routes (default 0.2):
   * `{ limit: 100, criticalReserve: 0.1 }`.
   */
  maxInFlight?: 'auto' | number | false | FixedInFlightOptions | AdaptiveInFlightOptions | FleetInFlightOptions
  /**
   * At most this many long-lived connections at once (websockets, event streams, replies marked
   * long-lived), apart from `maxInFlight`: beyond it a long-lived route's request is refused 503.
   * Default false: no bound.
   */
  maxLongLived?: number | false
  /** Log (once, at `warn`, with its route) a request holding its in-flight permit longer than this, ms; default 60 000; `false`: never. */
  permitWarningMs?: number | false
  /** The per-client rate limit (a policy, a stack or tiers); default `{ limit: 1000, windowMs: 60_000 }`, and so each field left out of one policy; `false`: none. */
  rateLimit?: OnePolicyOptions | NamedRateLimitOptions[] | TieredRateLimitOptions | false
  /** Tokens one request takes (default 1). */
  cost?: number
  /**
   * How the gate writes its built-in refusals: a body (`'json'`, the default; `'text'`;
   * `'problem'`; `'error'`, handed to Fastify's error handling), or `{ body, limitStatusCode, fast }`.
   * A refusal of the application's own is `errorResponseBuilder`.
   */
  refusal?: RefusalBody | RefusalOptions
  /** Builds the refusal (429 or 503) the application wants, sent through Fastify's error handling; `Retry-After` stays the gate's. */
  errorResponseBuilder?: ErrorResponseBuilder
  /**
   * Clients that skip the rate limit: keys, IP addresses and CIDR ranges, or a synchronous
   * `(request, key) => boolean`; `{ clients, skipsShedding: true }` lets them skip shedding too
   * (default: a full server sheds everyone).
   */
  allowList?: AllowListOption | SheddingAllowListOptions
  /** Where the rate check runs: `'onRequest'` (the default) or `'preHandler'` (after authentication: `key(request)` can read `request.user`). */
  hook?: AdmissionHook
  /** `false`: shadow mode — decide, count, log and set headers, never refuse (default true). */
  enforce?: boolean
  /**
   * Send the rate-limit fields on limited routes (default true: draft 11's `RateLimit-Policy` and
   * `RateLimit`, and the in-flight policy on a full gate's 503). `{ format }` chooses the fields
   * clients read: `'draft-11'`, `'draft-7'`, `'draft-6'`, `'x-ratelimit'`, or a list of them.
   * `{ partitionKey }` sends draft 11's with `pk`, a digest of the client's key (`true`: under a
   * secret drawn at registration; a string: under that secret, shared by a fleet).
   */
  headers?: boolean | HeadersOptions
  /** The client's key; default: `request.ip`, IPv6 grouped by `ipv6Subnet`. */
  key?: (request: FastifyRequest) => string
  /** Prefix length that groups IPv6 clients (default 56). */
  ipv6Subnet?: number
  /** Where quotas live; default `memoryBackend()` (`memoryBackend({ maxIdentities })` bounds the clients it tracks). */
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
  /** Called for each request the quota refuses: @fastify/rate-limit's `onExceeded`, with the wait and the client's key. */
  onLimit?: OnLimit
  /** Shed on the process's signals, as @fastify/under-pressure (see docs/migration/under-pressure.md). */
  pressure?: PressureOptions
  /** Shed on the event loop's queueing delay (CoDel): `true` for the defaults (target 5 ms, interval 100 ms). */
  queueDelay?: boolean | QueueDelayOptions
  /**
   * Metrics: Prometheus through prom-client (`registry`; an optional peer, loaded only with this
   * option) or OpenTelemetry through the app's `meter`; see docs/guides/metrics.md.
   */
  metrics?: AdmissionMetricsOptions
  /**
   * Retries shed first: a request whose attempt header (`Retry-Attempt`, a decimal integer, 1 for a
   * first attempt) says 2 or more is refused within the last `reserve` (default 0.1) of an in-flight
   * limit, and while queueing delay stands. On by default (the header only lowers a request's own
   * priority); `false`: off; `{ header, reserve }` (docs/guides/retries.md).
   */
  retries?: boolean | RetriesOptions
  /**
   * At most this many requests of one client (its `key`) in flight at once, on each route that
   * uses it (on a Redis backend, across the fleet); beyond, 429 with `Retry-After` and the
   * `client-in-flight` policy. Default false: none (docs/guides/in-flight.md).
   */
  clientInFlight?: number | false
  /**
   * The clients refused most over the last minute, in `stats().offenders` (docs/guides/offenders.md):
   * on by default (`{ top: 20 }`, keys as digests); `{ top, rawKeys }`; `false`: off.
   */
  offenders?: boolean | OffendersOptions
  /**
   * A live page of the gate's traffic, off by default: `GET /admission/live` (or `{ path }`), one
   * HTML page with no external asset that updates every second, and its JSON at `<path>/data`.
   * Without `auth` the server must listen on loopback only (docs/guides/live-page.md).
   */
  live?: boolean | LiveOptions
}

export interface RouteSettings {
  readonly maxInFlight: number | false
  /** A full route semaphore advertises its observed wait (`maxInFlight: { retryAfter: 'observed' }`). */
  readonly observedWait: boolean
  readonly priority: PriorityName
  /** `undefined`: the route uses the plugin's limiter (or its group's). */
  readonly rateLimit: Limits | false | undefined
  readonly cost: number
  readonly groupId: string | undefined
  readonly hook: AdmissionHook
  readonly enforce: boolean
  /** The route's builder, or the plugin's. */
  readonly errorResponseBuilder: ErrorResponseBuilder | undefined
  /** The route's allow list, or the plugin's. */
  readonly allowList: AllowMatcher | undefined
  /** The route's, or the plugin's. */
  readonly onBackendError: 'deny' | 'allow'
  readonly count: CountMode
  readonly failed: FailedResponse | undefined
  readonly charge: ChargeCallback | undefined
  /** undefined: as the route's declaration says (a websocket or @fastify/sse route). */
  readonly longLived: boolean | undefined
  readonly maxLongLived: number | false
  /** The route's own (`false`: none); undefined: the plugin's, counted with its other routes'. */
  readonly clientInFlight: number | false | undefined
}

export interface Settings {
  readonly maxInFlight: number | false | AdaptiveSettings | FleetSettings
  readonly criticalReserve: number
  readonly maxLongLived: number | false
  readonly permitWarningMs: number | false
  readonly rateLimit: Limits | false
  readonly cost: number
  readonly limitStatusCode: 429 | 503
  readonly responseBody: 'json' | 'text' | 'problem' | 'error'
  readonly fastRefusals: 'shed' | 'all' | false
  readonly errorResponseBuilder: ErrorResponseBuilder | undefined
  readonly allowList: AllowMatcher | undefined
  readonly allowListSkipsShedding: boolean
  readonly hook: AdmissionHook
  readonly enforce: boolean
  readonly headers: boolean
  /** The formats sent (none with `headers: false`), in the order given. */
  readonly headerFormats: readonly HeaderFormat[]
  /** `pk` of the client's key, when `headers.partitionKey` asks for it. */
  readonly partitionKey: PartitionKey | undefined
  /** The digest `pk` carries, when `headers.partitionKey` asks for it. */
  readonly keyDigest: KeyDigest | undefined
  readonly key: ((request: FastifyRequest) => string) | undefined
  readonly ipv6Subnet: number
  /** The backend given, or undefined for the default memory backend. */
  readonly backend: RatesBackend | undefined
  readonly onBackendError: 'deny' | 'allow'
  readonly version: string | undefined
  readonly onShed: ((request: FastifyRequest) => void) | undefined
  readonly onLimit: OnLimit | undefined
  readonly pressure: PressureSettings | undefined
  readonly queueDelay: QueueDelaySettings | undefined
  readonly metrics: MetricsSettings | undefined
  readonly retries: RetrySettings | undefined
  readonly clientInFlight: number | false
  readonly offenders: OffendersSettings | undefined
  readonly live: LiveSettings | undefined
}
