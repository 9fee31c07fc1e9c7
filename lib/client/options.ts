import { AdmissionOptionError } from '../validation/errors.js'
import { exactList, exactObject, numberInRange, optionalFunction, positiveInteger, type Shape } from '../validation/checks.js'
import type { BudgetConfig } from './budget.js'

/** What `onRetry` is told before a retry is scheduled. */
export interface RetryEvent {
  /** The origin the request goes to (`http://host:port`), or `''` when the dispatcher knows it alone (a `Pool`). */
  readonly origin: string
  readonly method: string
  readonly path: string
  /** The status that was refused and is retried. */
  readonly statusCode: number
  /** The attempt about to be sent: 2 for the first retry. */
  readonly attempt: number
  /** How long it waits before it is sent, in ms. */
  readonly waitMs: number
  /** Whether the wait is the server's (`Retry-After`, a spent quota's reset or a paused origin), or the client's own backoff. */
  readonly advertised: boolean
}

export interface AdmissionRetryOptions {
  /** Retries of one request at most (default 2); 0 sends each request once, still paced. */
  readonly maxRetries?: number
  /** The retry budget per origin: retries at most `ratio` of requests (default 0.1), or `minPerSecond` a second (default 1) when that is more, over `windowMs` (default 10 000). */
  readonly budget?: { readonly ratio?: number, readonly minPerSecond?: number, readonly windowMs?: number }
  /** Backoff where the server gives no time: full jitter over `baseDelayMs × 2^(retry − 1)` (default 100), capped at `maxDelayMs` (default 10 000). */
  readonly baseDelayMs?: number
  readonly maxDelayMs?: number
  /** The longest advertised wait honoured, in ms (default 60 000): a refusal asking for more is passed to the application, not retried. */
  readonly maxWaitMs?: number
  /** The methods retried (default GET, HEAD, OPTIONS, PUT, DELETE: the idempotent ones). */
  readonly methods?: readonly string[]
  /** The statuses retried (default 429, 502, 503, 504). */
  readonly statusCodes?: readonly number[]
  /** Told of each retry before it waits; a callback that throws is counted (`stats().callbackErrors`) and the retry goes on. */
  readonly onRetry?: (event: RetryEvent) => void
  /** The clock, ms since the epoch (default `Date.now`): compared with `Retry-After` dates, so a wall clock. */
  readonly now?: () => number
  /** A draw in [0, 1) for the jitter (default `Math.random`). */
  readonly random?: () => number
}

export interface Settings {
  readonly maxRetries: number
  readonly budget: BudgetConfig
  readonly baseDelayMs: number
  readonly maxDelayMs: number
  readonly maxWaitMs: number
  readonly methods: ReadonlySet<string>
  readonly statusCodes: ReadonlySet<number>
  readonly onRetry: ((event: RetryEvent) => void) | undefined
  readonly now: () => number
  readonly random: () => number
}

const complain = AdmissionOptionError.complain

const OPTIONS: Shape = {
  keys: ['maxRetries', 'budget', 'baseDelayMs', 'maxDelayMs', 'maxWaitMs', 'methods', 'statusCodes', 'onRetry', 'now', 'random'],
  expected: 'a plain object of admissionRetry options',
  nullPrototype: true,
  options: true,
  hints: { retries: '`maxRetries`', minTimeout: '`baseDelayMs`', maxTimeout: '`maxDelayMs`', retryAfter: 'always honoured, up to `maxWaitMs`', errorCodes: 'connection errors are passed through' }
}

const BUDGET: Shape = {
  keys: ['ratio', 'minPerSecond', 'windowMs'],
  expected: 'a plain object { ratio?, minPerSecond?, windowMs? }',
  nullPrototype: true,
  options: true
}

const IDEMPOTENT = ['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']
const REFUSALS = [429, 502, 503, 504]

function integerIn (path: string, value: unknown, min: number, max: number, expected: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) throw complain({ path, expected, value })
  return value
}

function budgetOf (value: unknown): BudgetConfig {
  const fields = exactObject(complain, 'options.budget', value ?? {}, BUDGET)
  const ratio = fields.ratio === undefined ? 0.1 : numberInRange(complain, 'options.budget.ratio', fields.ratio, 0, 1, 'a share of requests in [0, 1], such as 0.1')
  const minPerSecond = fields.minPerSecond === undefined ? 1 : integerIn('options.budget.minPerSecond', fields.minPerSecond, 0, 1_000_000, 'a whole number of retries a second, 0 or more')
  const windowMs = fields.windowMs === undefined ? 10_000 : integerIn('options.budget.windowMs', fields.windowMs, 1_000, 60_000, 'a whole number of ms from 1000 to 60000 (Finagle\'s bounds)')
  return { perMille: Math.round(ratio * 1000), minPerSecond, windowMs }
}

/** The options, checked once, with their defaults: an `AdmissionOptionError` names the first that is wrong and what it should be. */
export function settingsOf (options: unknown): Settings {
  const fields = exactObject(complain, 'options', options ?? {}, OPTIONS)
  const baseDelayMs = fields.baseDelayMs === undefined ? 100 : positiveInteger(complain, 'options.baseDelayMs', fields.baseDelayMs, 'a positive whole number of ms')
  const maxDelayMs = fields.maxDelayMs === undefined ? Math.max(10_000, baseDelayMs) : integerIn('options.maxDelayMs', fields.maxDelayMs, baseDelayMs, Number.MAX_SAFE_INTEGER, `a whole number of ms, at least baseDelayMs (${baseDelayMs})`)
  const methods = fields.methods === undefined
    ? IDEMPOTENT
    : exactList(complain, 'options.methods', fields.methods, 'an array of HTTP methods', 64).map((method, i) => {
      if (typeof method !== 'string' || !/^[A-Za-z]+$/.test(method)) throw complain({ path: `options.methods[${i}]`, expected: 'an HTTP method such as \'GET\'', value: method })
      return method.toUpperCase()
    })
  const statusCodes = fields.statusCodes === undefined
    ? REFUSALS
    : exactList(complain, 'options.statusCodes', fields.statusCodes, 'an array of statuses', 64).map((status, i) => integerIn(`options.statusCodes[${i}]`, status, 400, 599, 'an error status from 400 to 599'))
  return {
    maxRetries: fields.maxRetries === undefined ? 2 : integerIn('options.maxRetries', fields.maxRetries, 0, 100, 'a whole number of retries from 0 to 100'),
    budget: budgetOf(fields.budget),
    baseDelayMs,
    maxDelayMs,
    maxWaitMs: fields.maxWaitMs === undefined ? 60_000 : positiveInteger(complain, 'options.maxWaitMs', fields.maxWaitMs, 'a positive whole number of ms'),
    methods: new Set(methods),
    statusCodes: new Set(statusCodes),
    onRetry: optionalFunction(complain, 'options.onRetry', fields.onRetry),
    now: optionalFunction<() => number>(complain, 'options.now', fields.now) ?? Date.now,
    random: optionalFunction<() => number>(complain, 'options.random', fields.random) ?? Math.random
  }
}
