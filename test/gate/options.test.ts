import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import {
  validateOptions,
  validateRouteOptions,
  DEFAULT_RATE_LIMIT,
  DEFAULT_IPV6_SUBNET,
  type Settings
} from '../../lib/gate/options/options.js'
import { AdmissionError, AdmissionOptionError } from '../../lib/gate/errors.js'
import admission, {
  AdmissionOptionError as ExportedOptionError,
  MemoryBackend,
  memoryBackend,
  RatesInvalidArgumentError
} from '../../lib/index.js'
import type { AdmissionOptions, RatesBackend } from '../../lib/index.js'
import type { Algorithm } from '../../lib/core/rates/types.js'
import type { Policy } from '../../lib/core/rates/types.js'
import { capacityOf, normalizePolicy } from '../../lib/rates/policy.js'

const MAX = Number.MAX_SAFE_INTEGER
const ALGORITHMS: readonly Algorithm[] = ['token-bucket', 'fixed-window', 'sliding-window-counter', 'gcra']
const WINDOW_ALGORITHMS: readonly Algorithm[] = ['fixed-window', 'sliding-window-counter']

/** A bad value and how it must appear in the message. */
type Bad = [value: unknown, shown: string]

// Values that are never a positive safe integer.
const NOT_POSITIVE_INTEGERS: Bad[] = [
  [0, '0'],
  [-0, '-0'],
  [-1, '-1'],
  [-1000, '-1000'],
  [1.5, '1.5'],
  [0.1, '0.1'],
  [NaN, 'NaN'],
  [Infinity, 'Infinity'],
  [-Infinity, '-Infinity'],
  [MAX + 1, '9007199254740992'],
  [1e300, '1e+300'],
  ['5', "'5'"],
  ['', "''"],
  [true, 'true'],
  [false, 'false'],
  [null, 'null'],
  [5n, '5n'],
  [[5], '[ 5 ]'],
  [{ valueOf: () => 5 }, '{ valueOf: [Function: valueOf] }']
]

/** Checks that `error` is the typed option error for `path` with `value`, shown in the message. */
function isOptionError (t: Test, error: unknown, path: string, value: unknown, shown: string, where = ''): void {
  const label = `${where}${path} = ${shown}`
  if (!(error instanceof AdmissionOptionError)) {
    t.fail(`${label}: expected an AdmissionOptionError, got ${String(error)}`)
    return
  }
  t.ok(error instanceof AdmissionError, `${label}: an AdmissionError`)
  t.ok(error instanceof Error)
  t.equal(error.name, 'AdmissionOptionError')
  t.equal(error.code, 'ADMISSION_INVALID_OPTION', `${label}: code`)
  t.equal(error.path, path, `${label}: path`)
  t.ok(Object.is(error.value, value), `${label}: value is the one given`)
  t.ok(error.message.includes(`\`${path}\``), `${label}: the message names ${path}: ${error.message}`)
  t.ok(error.message.includes(`got ${shown}`), `${label}: the message shows ${shown}: ${error.message}`)
}

/**
 * Checks that `error` is the option error that carries the rates validator's complaint about a
 * policy: the gate's type and code, the validator's path, value and exact message, and the
 * validator's own error as its cause.
 */
function isPolicyError (t: Test, error: unknown, path: string, value: unknown, message: string, where = ''): void {
  const label = `${where}${path}`
  if (!(error instanceof AdmissionOptionError)) {
    t.fail(`${label}: expected an AdmissionOptionError, got ${String(error)}`)
    return
  }
  t.ok(error instanceof AdmissionError, `${label}: an AdmissionError`)
  t.equal(error.code, 'ADMISSION_INVALID_OPTION', `${label}: code`)
  t.equal(error.path, path, `${label}: path`)
  if (typeof value === 'object' && value !== null) t.same(error.value, value, `${label}: value`)
  else t.ok(Object.is(error.value, value), `${label}: value is ${String(value)}`)
  t.equal(error.message, message, `${label}: the validator's message`)
  // The same validator, the same toolkit: the gate's error is made directly, with the same message.
  t.notOk(error instanceof RatesInvalidArgumentError, `${label}: the gate's own error type`)
}

function thrown (fn: () => unknown): unknown {
  try {
    fn()
  } catch (error) {
    return error
  }
  return undefined
}

const optionsRejected = (t: Test, options: unknown, path: string, value: unknown, shown: string): void => {
  isOptionError(t, thrown(() => validateOptions(options)), path, value, shown)
}

/** What the rates validator itself says about `rateLimit` (with the gate's default algorithm). */
const validatorMessage = (rateLimit: unknown, path = 'rateLimit'): string =>
  (thrown(() => normalizePolicy(rateLimit, path, { algorithm: 'token-bucket' })) as Error).message

/** `rateLimit` is refused with the validator's message, which is `message` when given. */
const rateRejected = (t: Test, rateLimit: unknown, path: string, value: unknown, message?: string): void => {
  const expected = validatorMessage(rateLimit)
  if (message !== undefined) t.equal(expected, message, `${path}: the validator says so`)
  isPolicyError(t, thrown(() => validateOptions({ rateLimit })), path, value, expected)
}

const POLICY_SHAPE = 'a plain object { algorithm, limit, windowMs, burst?, penalty? }'

// A valid rate limit to vary one field of.
const RL = { limit: 10, windowMs: 1000, burst: 5 }
// What a route's settings hold beyond the gate's numbers, when it sets none of it.
const ROUTE_REST = { groupId: undefined, hook: 'onRequest', enforce: true, errorResponseBuilder: undefined, allowList: undefined, onBackendError: 'deny' }
/** What a route's settings hold besides what a test sets: `ROUTE_REST` and the default priority. */
const ROUTE_OUT = { observedWait: false, priority: 'normal', ...ROUTE_REST, count: 'requests', failed: undefined, charge: undefined, longLived: undefined, maxLongLived: false, clientInFlight: undefined }

// ---------------------------------------------------------------------------------------------
// validateOptions

t.test('defaults', async (t) => {
  for (const options of [undefined, {}, Object.create(null) as object]) {
    const s = validateOptions(options)
    t.strictSame({ ...s }, {
      maxInFlight: false,
      criticalReserve: 0,
      maxLongLived: false,
      permitWarningMs: 60_000,
      rateLimit: { algorithm: 'token-bucket', limit: 1000, windowMs: 60_000, burst: 1000 },
      cost: 1,
      limitStatusCode: 429,
      responseBody: 'json',
      fastRefusals: 'shed',
      headers: true,
      headerFormats: ['draft-11'],
      partitionKey: undefined,
      key: undefined,
      ipv6Subnet: 56,
      backend: undefined,
      onBackendError: 'deny',
      version: undefined,
      onShed: undefined,
      onLimit: undefined,
      pressure: undefined,
      queueDelay: undefined,
      metrics: undefined,
      errorResponseBuilder: undefined,
      allowList: undefined,
      allowListSkipsShedding: false,
      hook: 'onRequest',
      enforce: true,
      retries: { header: 'retry-attempt', reserve: 0.1 },
      clientInFlight: false,
      keyDigest: undefined,
      offenders: { top: 20, rawKeys: false },
      live: undefined
    })
    t.ok(Object.isFrozen(s), 'settings are frozen')
    t.equal(s.rateLimit, DEFAULT_RATE_LIMIT)
    t.ok(Object.isFrozen(s.rateLimit))
    t.equal(s.backend, undefined, 'the default memory backend is made by the plugin')
  }
  t.equal(DEFAULT_IPV6_SUBNET, 56)
  t.strictSame({ ...DEFAULT_RATE_LIMIT }, { algorithm: 'token-bucket', limit: 1000, windowMs: 60_000, burst: 1000 })
  t.ok(Object.isFrozen(DEFAULT_RATE_LIMIT))
})

t.test('every option, valid', async (t) => {
  const key = (): string => 'k'
  const onShed = (): void => {}
  const onLimit = (): void => {}
  const s = validateOptions({
    maxInFlight: 512,
    rateLimit: { limit: 100, windowMs: 60_000, burst: 20 },
    cost: 20,
    refusal: { body: 'text', limitStatusCode: 503, fast: 'shed' },
    headers: false,
    key,
    ipv6Subnet: 64,
    onBackendError: 'allow',
    onShed,
    onLimit,
    retries: { header: 'X-Attempt', reserve: 0.25 },
    clientInFlight: 4,
    offenders: { top: 5, rawKeys: true },
    live: { path: '/ops/live' }
  })
  t.strictSame({ ...s, rateLimit: { ...s.rateLimit } }, {
    maxInFlight: 512,
    criticalReserve: 0.2,
    maxLongLived: false,
    permitWarningMs: 60_000,
    rateLimit: { algorithm: 'token-bucket', limit: 100, windowMs: 60_000, burst: 20 },
    cost: 20,
    limitStatusCode: 503,
    responseBody: 'text',
    fastRefusals: 'shed',
    headers: false,
    headerFormats: [],
    partitionKey: undefined,
    key,
    ipv6Subnet: 64,
    backend: undefined,
    onBackendError: 'allow',
    version: undefined,
    onShed,
    onLimit,
    pressure: undefined,
    queueDelay: undefined,
    metrics: undefined,
    errorResponseBuilder: undefined,
    allowList: undefined,
    allowListSkipsShedding: false,
    hook: 'onRequest',
    enforce: true,
    retries: { header: 'x-attempt', reserve: 0.25 },
    clientInFlight: 4,
    keyDigest: undefined,
    offenders: { top: 5, rawKeys: true },
    live: { path: '/ops/live', auth: undefined }
  })
  t.equal(s.key, key)
  t.equal(s.onShed, onShed)
  t.equal(s.onLimit, onLimit)
  // An async key is refused: its promise is not a key.
  const asyncKey = thrown(() => validateOptions({ key: async function () { return 'k' } })) as AdmissionOptionError
  t.equal(asyncKey.code, 'ADMISSION_INVALID_OPTION')
  t.equal(asyncKey.path, 'key')
  t.match(asyncKey.message, /synchronous function/)
  // Other kinds of functions are functions.
  const Bound = function (this: unknown): string { return 'k' }.bind(null)
  t.equal(validateOptions({ key: Bound }).key, Bound)
  // The memory backend's bound is the backend's own option.
  const backend = memoryBackend({ maxIdentities: 10 })
  const b = validateOptions({ rateLimit: { algorithm: 'gcra', limit: 100, windowMs: 60_000, burst: 20 }, backend })
  t.equal(b.backend, backend)
  t.strictSame({ ...b.rateLimit }, { algorithm: 'gcra', limit: 100, windowMs: 60_000, burst: 20 })
})

t.test('a null-prototype object is a plain object for the options, but a policy must be an exact plain object', async (t) => {
  const options = Object.assign(Object.create(null) as object, {
    maxInFlight: 3,
    rateLimit: { limit: 4, windowMs: 5 }
  })
  const s = validateOptions(options)
  t.equal(s.maxInFlight, 3)
  t.strictSame({ ...s.rateLimit }, { algorithm: 'token-bucket', limit: 4, windowMs: 5, burst: 4 })
  // The rates validator's rule: a policy's prototype is Object's.
  const bare = Object.assign(Object.create(null) as object, { limit: 4, windowMs: 5 })
  rateRejected(t, bare, 'rateLimit', bare, `Expected \`rateLimit\` to be ${POLICY_SHAPE}, got [Object: null prototype] { limit: 4, windowMs: 5 }`)
})

t.test('the options must be a plain object', async (t) => {
  class Options { maxInFlight = 5 }
  const instance = new Options()
  const array = [1]
  const date = new Date(0)
  const map = new Map()
  const fn = (): void => {}
  const inherited = Object.create({ maxInFlight: 5 }) as object
  const cases: Bad[] = [
    [instance, 'Options'],
    [array, '[ 1 ]'],
    [[], '[]'],
    [date, '1970-01-01'],
    [map, 'Map'],
    [fn, 'fn'],
    [inherited, '{}'],
    ['options', "'options'"],
    [5, '5'],
    [true, 'true']
  ]
  for (const [value, shown] of cases) {
    const error = thrown(() => validateOptions(value))
    isOptionError(t, error, 'options', value, '', '')
    t.match((error as Error).message, 'to be an options object', shown)
    t.ok((error as Error).message.includes(shown), `the message shows ${shown}: ${(error as Error).message}`)
  }
})

t.test('unknown keys are refused, at the top and in rateLimit', async (t) => {
  optionsRejected(t, { maxInflight: 5 }, 'options.maxInflight', 5, '5 (number)')
  optionsRejected(t, { rateLimit: RL, windowMs: 1000 }, 'options.windowMs', 1000, '1000 (number)')
  optionsRejected(t, { limit: 10 }, 'options.limit', 10, '10 (number)')
  optionsRejected(t, { burst: undefined }, 'options.burst', undefined, 'undefined (undefined)')
  optionsRejected(t, { algorithm: 'gcra' }, 'options.algorithm', 'gcra', "'gcra' (string)")
  // In rateLimit, the rates validator speaks: the path names the key, the value is the key.
  const unknownKey = (key: string): string => `Expected \`rateLimit\` to be ${POLICY_SHAPE} (no other keys), got the unknown key ${JSON.stringify(key)}`
  rateRejected(t, { ...RL, max: 3 }, 'rateLimit.max', 'max', unknownKey('max'))
  rateRejected(t, { ...RL, cost: 3 }, 'rateLimit.cost', 'cost', unknownKey('cost'))
  rateRejected(t, { ...RL, timeWindow: '1 minute' }, 'rateLimit.timeWindow', 'timeWindow', unknownKey('timeWindow'))
  rateRejected(t, { ...RL, 'time window': 1 }, 'rateLimit["time window"]', 'time window', unknownKey('time window'))
  rateRejected(t, { ...RL, maxInFlight: 1 }, 'rateLimit.maxInFlight', 'maxInFlight', unknownKey('maxInFlight'))
  // Keys that are not enumerable are still keys.
  const hidden = Object.defineProperty({}, 'secret', { value: 1, enumerable: false })
  optionsRejected(t, hidden, 'options.secret', 1, '1 (number)')
  const hiddenField = Object.defineProperty({ limit: 1 }, 'windowMs', { value: 5, enumerable: false })
  rateRejected(t, hiddenField, 'rateLimit.windowMs', 5, 'Expected `rateLimit.windowMs` to be an enumerable property, got a non-enumerable property holding 5 (number)')
  // A getter is refused without being invoked.
  let invoked = 0
  const getter = Object.defineProperty({ limit: 1 }, 'windowMs', { get () { invoked++; return 5 }, enumerable: true })
  const error = thrown(() => validateOptions({ rateLimit: getter })) as AdmissionOptionError
  t.equal(error.path, 'rateLimit.windowMs')
  t.equal(error.message, 'Expected `rateLimit.windowMs` to be a data property, got an accessor property (getter or setter), which is not invoked')
  t.equal(invoked, 0, 'the getter never ran')
  // Keys that look like prototype keys.
  const proto = JSON.parse('{"__proto__": {"maxInFlight": 1}}') as object
  optionsRejected(t, proto, 'options.__proto__', (proto as Record<string, unknown>).__proto__, '{ maxInFlight: 1 }')
  const protoPolicy = JSON.parse('{"limit": 1, "windowMs": 1, "__proto__": {"burst": 1}}') as object
  rateRejected(t, protoPolicy, 'rateLimit.__proto__', '__proto__', unknownKey('__proto__'))
  // The message lists what is known.
  const top = thrown(() => validateOptions({ nope: 1 })) as Error
  t.match(top.message, /one of maxInFlight, rateLimit, cost, hook, enforce, errorResponseBuilder, allowList, onBackendError, maxLongLived, permitWarningMs, refusal, headers, key, ipv6Subnet, backend, version, onShed, onLimit, pressure, queueDelay, metrics, retries, clientInFlight, offenders, live, prefix, logLevel, logSerializers \(unknown option\)/)
})

t.test('symbol keys are refused', async (t) => {
  const sym = Symbol('tuning')
  optionsRejected(t, { [sym]: 7 }, 'options.Symbol(tuning)', 7, '7 (number)')
  rateRejected(t, { ...RL, [sym]: 'x' }, 'rateLimit[Symbol(tuning)]', sym,
    `Expected \`rateLimit\` to be ${POLICY_SHAPE} (no symbol keys), got the symbol key Symbol(tuning)`)
  const hidden = Object.defineProperty({}, sym, { value: 1, enumerable: false })
  optionsRejected(t, hidden, 'options.Symbol(tuning)', 1, '1 (number)')
  rateRejected(t, Object.defineProperty({ ...RL }, sym, { value: 1, enumerable: false }), 'rateLimit[Symbol(tuning)]', sym)
})

t.test("Fastify's own register keys are accepted", async (t) => {
  const s = validateOptions({ prefix: '/api', logLevel: 'warn', logSerializers: {}, maxInFlight: 2 })
  t.equal(s.maxInFlight, 2)
  t.notOk('prefix' in s)
  // ...but only at the top: not inside rateLimit.
  rateRejected(t, { ...RL, prefix: '/x' }, 'rateLimit.prefix', 'prefix')
})

t.test('numbers must be positive safe integers', async (t) => {
  const fields: Array<[path: string, build: (v: unknown) => unknown]> = [
    ['rateLimit.limit', (v) => ({ rateLimit: { ...RL, limit: v } })],
    ['rateLimit.windowMs', (v) => ({ rateLimit: { ...RL, windowMs: v } })],
    ['rateLimit.burst', (v) => ({ rateLimit: { ...RL, burst: v } })],
    ['rateLimit.burst', (v) => ({ rateLimit: { ...RL, algorithm: 'gcra', burst: v } })],
    ['cost', (v) => ({ rateLimit: RL, cost: v })],
    ['ipv6Subnet', (v) => ({ ipv6Subnet: v })],
    ['maxInFlight', (v) => ({ maxInFlight: v })]
  ]
  for (const [path, build] of fields) {
    for (const [value, shown] of NOT_POSITIVE_INTEGERS) {
      if (path === 'maxInFlight' && value === false) continue // false: no shedding
      optionsRejected(t, build(value), path, value, shown)
    }
    const error = thrown(() => validateOptions(build(0))) as Error
    t.match(error.message, path === 'maxInFlight' ? 'a positive safe integer or false' : 'a positive safe integer', `${path}: what is expected`)
    if (path.startsWith('rateLimit.')) {
      t.equal(error.message, `Expected \`${path}\` to be a positive safe integer, got 0 (number)`, `${path}: the rates validator's message`)
      t.type(error, AdmissionOptionError, `${path}: the gate's error, from the shared validator`)
    }
  }
  // The largest values are fine.
  t.equal(validateOptions({ maxInFlight: MAX }).maxInFlight, MAX)
  t.equal(validateOptions({ maxInFlight: 1 }).maxInFlight, 1)
  t.strictSame({ ...validateOptions({ rateLimit: { limit: MAX, windowMs: 1 } }).rateLimit }, { algorithm: 'token-bucket', limit: MAX, windowMs: 1, burst: MAX })
})

t.test('maxInFlight: a positive integer or false', async (t) => {
  t.equal(validateOptions({ maxInFlight: false }).maxInFlight, false)
  t.equal(validateOptions({ maxInFlight: 8 }).maxInFlight, 8)
  t.equal(validateOptions({ maxInFlight: undefined }).maxInFlight, false)
  optionsRejected(t, { maxInFlight: true }, 'maxInFlight', true, 'true (boolean)')
  optionsRejected(t, { maxInFlight: 'false' }, 'maxInFlight', 'false', "'false' (string)")
  optionsRejected(t, { maxInFlight: 0 }, 'maxInFlight', 0, '0 (number)')
})

t.test('rateLimit: a plain object or false', async (t) => {
  t.equal(validateOptions({ rateLimit: false }).rateLimit, false)
  t.equal(validateOptions({ rateLimit: undefined }).rateLimit, DEFAULT_RATE_LIMIT)
  class Limit { limit = 1; windowMs = 1 }
  const limit = new Limit()
  for (const [value, shown] of [[true, 'true (boolean)'], [null, 'null (null)'], [0, '0 (number)'], ['100/min', "'100/min' (string)"], [limit, 'Limit { limit: 1, windowMs: 1 }'], [Object.create({ limit: 1, windowMs: 1 }), '{}']] as Bad[]) {
    rateRejected(t, value, 'rateLimit', value, `Expected \`rateLimit\` to be ${POLICY_SHAPE}, got ${shown}`)
  }
  // A list is a stack of policies: each item is a policy.
  const item = thrown(() => validateOptions({ rateLimit: [1, 1000] })) as AdmissionOptionError
  t.equal(item.path, 'rateLimit[0]')
  t.equal(item.message, `Expected \`rateLimit[0]\` to be ${POLICY_SHAPE}, got 1 (number)`)
  // A field left out is the default's (1000 per 60 000 ms, a token bucket); one given is checked.
  t.same(validateOptions({ rateLimit: {} }).rateLimit, DEFAULT_RATE_LIMIT)
  t.same(validateOptions({ rateLimit: { limit: 5 } }).rateLimit, { algorithm: 'token-bucket', limit: 5, windowMs: 60_000, burst: 5 })
  t.same(validateOptions({ rateLimit: { windowMs: 5 } }).rateLimit, { algorithm: 'token-bucket', limit: 1000, windowMs: 5, burst: 1000 })
  t.same(validateOptions({ rateLimit: { algorithm: 'fixed-window' } }).rateLimit, { algorithm: 'fixed-window', limit: 1000, windowMs: 60_000 })
  rateRejected(t, { limit: 0 }, 'rateLimit.limit', 0, 'Expected `rateLimit.limit` to be a positive safe integer, got 0 (number)')
  // The result is a copy: changing the input later changes nothing.
  const input = { limit: 5, windowMs: 1000 }
  const s = validateOptions({ rateLimit: input })
  input.limit = 500
  t.equal(s.rateLimit && (s.rateLimit as Policy).limit, 5)
  t.ok(Object.isFrozen(s.rateLimit))
})

t.test('Proxies and getters: one rule for options, route configs and policies — a Proxy is refused unread, a getter never runs', async (t) => {
  let reads = 0
  const proxy = new Proxy({ limit: 1, windowMs: 1 }, { ownKeys (target) { reads++; return Reflect.ownKeys(target) } })
  for (const [label, run] of [
    ['rateLimit', () => validateOptions({ rateLimit: proxy })],
    ['route rateLimit', () => validateRouteOptions({ rateLimit: proxy }, 'GET /x', validateOptions({}))],
    ['options', () => validateOptions(new Proxy({}, {}))],
    ['route config', () => validateRouteOptions(new Proxy({}, {}), 'GET /x', validateOptions({}))]
  ] as const) {
    const error = thrown(run) as AdmissionOptionError
    t.type(error, AdmissionOptionError, label)
    t.match(error.message, /got a Proxy, which is not read/, label)
  }
  t.equal(reads, 0, 'no trap ran')
  let invoked = 0
  const withGetter = Object.defineProperty({}, 'maxInFlight', { enumerable: true, get () { invoked++; return 3 } })
  const error = thrown(() => validateOptions(withGetter)) as AdmissionOptionError
  t.equal(error.path, 'options.maxInFlight')
  t.match(error.message, 'an accessor property (getter or setter), which is not invoked')
  const unknownGetter = thrown(() => validateOptions(Object.defineProperty({}, 'nope', { enumerable: true, get () { invoked++; return 1 } }))) as AdmissionOptionError
  t.equal(unknownGetter.path, 'options.nope', 'an unknown option behind a getter: named, not read')
  const hidden = Object.defineProperty({}, 'cost', { enumerable: false, value: 2 })
  t.match((thrown(() => validateOptions(hidden)) as Error).message, 'a non-enumerable property holding 2 (number)')
  t.equal(invoked, 0)
})

t.test('rateLimit.algorithm: each of the four, token-bucket by default', async (t) => {
  for (const algorithm of ALGORITHMS) {
    const s = validateOptions({ rateLimit: { algorithm, limit: 7, windowMs: 1000 } })
    const policy = s.rateLimit as Policy | false
    if (policy === false) throw new Error('no policy')
    t.equal(policy.algorithm, algorithm)
    const windowed = WINDOW_ALGORITHMS.includes(algorithm)
    t.strictSame(Object.keys(policy), windowed ? ['algorithm', 'limit', 'windowMs'] : ['algorithm', 'limit', 'windowMs', 'burst'], `${algorithm}: normalized`)
    t.strictSame({ ...policy }, windowed ? { algorithm, limit: 7, windowMs: 1000 } : { algorithm, limit: 7, windowMs: 1000, burst: 7 })
    t.ok(Object.isFrozen(policy))
    t.equal(s.cost, 1)
    // The same on a route.
    const route = validateRouteOptions({ rateLimit: { algorithm, limit: 7, windowMs: 1000 } }, 'GET /a', s)
    t.strictSame(route !== false && route.rateLimit !== undefined && route.rateLimit !== false ? { ...route.rateLimit } : route, { ...policy }, `${algorithm} on a route`)
  }
  t.equal((validateOptions({ rateLimit: { limit: 7, windowMs: 1000 } }).rateLimit as { algorithm: string }).algorithm, 'token-bucket', 'absent: token-bucket')
  t.equal((validateOptions({ rateLimit: { algorithm: undefined, limit: 7, windowMs: 1000 } }).rateLimit as { algorithm: string }).algorithm, 'token-bucket', 'undefined counts as absent')
  const oneOf = "one of 'token-bucket', 'fixed-window', 'sliding-window-counter', 'gcra'"
  for (const [value, shown] of [
    ['leaky-bucket', "'leaky-bucket' (string)"],
    ['Token-Bucket', "'Token-Bucket' (string)"],
    ['token_bucket', "'token_bucket' (string)"],
    ['tokenBucket', "'tokenBucket' (string)"],
    ['sliding-window', "'sliding-window' (string)"],
    ['', "'' (string)"],
    [null, 'null (null)'],
    [1, '1 (number)'],
    [['gcra'], "[ 'gcra' ]"],
    [{ toString: () => 'gcra' }, '{ toString: [Function: toString] }']
  ] as Bad[]) {
    rateRejected(t, { algorithm: value, limit: 7, windowMs: 1000 }, 'rateLimit.algorithm', value, `Expected \`rateLimit.algorithm\` to be ${oneOf}, got ${shown}`)
  }
})

t.test('rateLimit.burst: defaults to limit for token-bucket and gcra; refused for the window algorithms', async (t) => {
  for (const algorithm of ['token-bucket', 'gcra'] as const) {
    const policy = (burst: unknown): unknown => validateOptions({ rateLimit: { algorithm, limit: 7, windowMs: 1000, burst } }).rateLimit
    t.strictSame({ ...validateOptions({ rateLimit: { algorithm, limit: 7, windowMs: 1000 } }).rateLimit }, { algorithm, limit: 7, windowMs: 1000, burst: 7 })
    t.strictSame({ ...(policy(undefined) as object) }, { algorithm, limit: 7, windowMs: 1000, burst: 7 }, 'undefined counts as absent')
    t.strictSame({ ...(policy(70) as object) }, { algorithm, limit: 7, windowMs: 1000, burst: 70 })
    t.strictSame({ ...(policy(1) as object) }, { algorithm, limit: 7, windowMs: 1000, burst: 1 })
  }
  for (const algorithm of WINDOW_ALGORITHMS) {
    const absent = `absent for algorithm '${algorithm}' (only 'token-bucket' and 'gcra' have a burst)`
    for (const [value, shown] of [[5, '5 (number)'], [7, '7 (number)'], [0, '0 (number)'], [null, 'null (null)'], ['5', "'5' (string)"]] as Bad[]) {
      rateRejected(t, { algorithm, limit: 7, windowMs: 1000, burst: value }, 'rateLimit.burst', value, `Expected \`rateLimit.burst\` to be ${absent}, got ${shown}`)
    }
    t.strictSame({ ...validateOptions({ rateLimit: { algorithm, limit: 7, windowMs: 1000, burst: undefined } }).rateLimit }, { algorithm, limit: 7, windowMs: 1000 }, `${algorithm}: burst undefined counts as absent`)
    // On a route too, with the route's path.
    const error = thrown(() => validateRouteOptions({ rateLimit: { algorithm, limit: 7, windowMs: 1000, burst: 7 } }, 'GET /w', validateOptions({})))
    isPolicyError(t, error, 'config.admission of GET /w.rateLimit.burst', 7, `Expected \`config.admission of GET /w.rateLimit.burst\` to be ${absent}, got 7 (number)`)
  }
})

t.test('the numbers each algorithm keeps exact must stay safe integers', async (t) => {
  const safe = `a safe integer (at most ${MAX})`
  // token-bucket: burst × windowMs (the bucket counts in 1/windowMs of a token).
  const windowMs = 1_000_000
  const most = Math.floor(MAX / windowMs) // 9 007 199 254
  t.strictSame({ ...validateOptions({ rateLimit: { limit: 1, windowMs, burst: most } }).rateLimit }, { algorithm: 'token-bucket', limit: 1, windowMs, burst: most })
  rateRejected(t, { limit: 1, windowMs, burst: most + 1 }, 'rateLimit', { algorithm: 'token-bucket', limit: 1, windowMs, burst: most + 1 },
    `Expected \`rateLimit.burst * rateLimit.windowMs\` to be ${safe}, got 9007199255000000 (9007199255 * 1000000)`)
  // The product exactly at the bound: 2^53 - 1 = 6361 × 69431 × 20394401.
  t.equal(6361 * 69431 * 20394401, MAX)
  t.strictSame({ ...validateOptions({ rateLimit: { limit: 3, windowMs: 6361 * 69431, burst: 20394401 } }).rateLimit },
    { algorithm: 'token-bucket', limit: 3, windowMs: 6361 * 69431, burst: 20394401 })
  rateRejected(t, { limit: 3, windowMs: 6361 * 69431 + 1, burst: 20394401 }, 'rateLimit', { algorithm: 'token-bucket', limit: 3, windowMs: 6361 * 69431 + 1, burst: 20394401 })
  // With the default burst (= limit) the product is checked too.
  rateRejected(t, { limit: 2 ** 40, windowMs: 2 ** 13 }, 'rateLimit', { algorithm: 'token-bucket', limit: 2 ** 40, windowMs: 2 ** 13, burst: 2 ** 40 },
    `Expected \`rateLimit.burst * rateLimit.windowMs\` to be ${safe}, got ${2 ** 53} (${2 ** 40} * ${2 ** 13})`)
  t.ok(validateOptions({ rateLimit: { limit: 2 ** 40, windowMs: 2 ** 12 } }).rateLimit)
  t.ok(validateOptions({ rateLimit: { limit: 2 ** 40, windowMs: 2 ** 13, burst: 1 } }).rateLimit)
  // sliding-window-counter: limit × windowMs.
  t.ok(validateOptions({ rateLimit: { algorithm: 'sliding-window-counter', limit: 2 ** 20, windowMs: 2 ** 33 - 1 } }).rateLimit)
  rateRejected(t, { algorithm: 'sliding-window-counter', limit: 2 ** 20, windowMs: 2 ** 33 }, 'rateLimit', { algorithm: 'sliding-window-counter', limit: 2 ** 20, windowMs: 2 ** 33 },
    `Expected \`rateLimit.limit * rateLimit.windowMs\` to be ${safe}, got ${2 ** 53} (${2 ** 20} * ${2 ** 33})`)
  t.ok(validateOptions({ rateLimit: { algorithm: 'fixed-window', limit: 2 ** 20, windowMs: 2 ** 33 } }).rateLimit, 'no such product for a fixed window')
  // The window algorithms: 2 × windowMs (the time a state takes to recover).
  for (const algorithm of WINDOW_ALGORITHMS) {
    t.ok(validateOptions({ rateLimit: { algorithm, limit: 1, windowMs: 2 ** 52 - 1 } }).rateLimit, `${algorithm}: 2 × (2^52 - 1) is safe`)
    rateRejected(t, { algorithm, limit: 1, windowMs: 2 ** 52 }, 'rateLimit', { algorithm, limit: 1, windowMs: 2 ** 52 },
      `Expected \`2 * rateLimit.windowMs (the state's time to full recovery in ms)\` to be ${safe}, got ${2 ** 53} (2 * ${2 ** 52})`)
  }
  // gcra: its time scale limit / gcd(limit, windowMs) until the year 2100, and burst × its emission interval.
  t.ok(validateOptions({ rateLimit: { algorithm: 'gcra', limit: 2195, windowMs: 1 } }).rateLimit)
  rateRejected(t, { algorithm: 'gcra', limit: 2196, windowMs: 1 }, 'rateLimit', { algorithm: 'gcra', limit: 2196, windowMs: 1, burst: 2196 },
    `Expected \`rateLimit.limit / gcd(rateLimit.limit, rateLimit.windowMs) * 4102444800000 (GCRA's time scale until the year 2100)\` to be ${safe}, got 9008968780800000 (2196 * 4102444800000)`)
  t.ok(validateOptions({ rateLimit: { algorithm: 'gcra', limit: 2196, windowMs: 2 } }).rateLimit, 'the scale is reduced by the gcd')
  t.ok(validateOptions({ rateLimit: { algorithm: 'token-bucket', limit: 2196, windowMs: 1 } }).rateLimit, 'no such bound for a token bucket')
  rateRejected(t, { algorithm: 'gcra', limit: 1, windowMs: 2 ** 30, burst: 2 ** 23 }, 'rateLimit', { algorithm: 'gcra', limit: 1, windowMs: 2 ** 30, burst: 2 ** 23 },
    `Expected \`rateLimit.burst * rateLimit.windowMs / gcd(rateLimit.limit, rateLimit.windowMs)\` to be ${safe}, got ${2 ** 53} (${2 ** 23} * ${2 ** 30})`)
  t.ok(validateOptions({ rateLimit: { algorithm: 'gcra', limit: 2, windowMs: 2 ** 30, burst: 2 ** 23 } }).rateLimit, 'T = windowMs / gcd')
})

t.test("cost: at most the policy's capacity — burst for token-bucket and gcra, limit for the windows", async (t) => {
  const capacity = (n: number): string => `at most the policy's capacity (${n})`
  t.equal(validateOptions({ rateLimit: RL, cost: 5 }).cost, 5)
  optionsRejected(t, { rateLimit: RL, cost: 6 }, 'cost', 6, '6 (number)')
  t.equal((thrown(() => validateOptions({ rateLimit: RL, cost: 6 })) as Error).message, `Expected \`cost\` to be ${capacity(5)}, got 6 (number)`)
  const cases: Array<[rateLimit: Record<string, unknown>, capacity: number]> = [
    [{ algorithm: 'token-bucket', limit: 10, windowMs: 1000, burst: 3 }, 3],
    [{ algorithm: 'token-bucket', limit: 10, windowMs: 1000, burst: 30 }, 30],
    [{ algorithm: 'token-bucket', limit: 10, windowMs: 1000 }, 10],
    [{ algorithm: 'gcra', limit: 10, windowMs: 1000, burst: 3 }, 3],
    [{ algorithm: 'gcra', limit: 10, windowMs: 1000, burst: 30 }, 30],
    [{ algorithm: 'gcra', limit: 10, windowMs: 1000 }, 10],
    [{ algorithm: 'fixed-window', limit: 10, windowMs: 1000 }, 10],
    [{ algorithm: 'fixed-window', limit: 1, windowMs: 1000 }, 1],
    [{ algorithm: 'sliding-window-counter', limit: 7, windowMs: 1000 }, 7]
  ]
  for (const [rateLimit, n] of cases) {
    const label = JSON.stringify(rateLimit)
    t.equal(capacityOf(normalizePolicy(rateLimit)), n, `${label}: capacity ${n}`)
    t.equal(validateOptions({ rateLimit, cost: n }).cost, n, `${label}: cost ${n}`)
    const error = thrown(() => validateOptions({ rateLimit, cost: n + 1 }))
    isOptionError(t, error, 'cost', n + 1, `${n + 1} (number)`)
    t.match((error as Error).message, capacity(n), label)
    // The same rule on a route, with the route's own policy...
    const route = thrown(() => validateRouteOptions({ rateLimit, cost: n + 1 }, 'GET /c', validateOptions({})))
    isOptionError(t, route, 'config.admission of GET /c.cost', n + 1, `${n + 1} (number)`)
    // ...and against the plugin's policy for a route without one.
    const plugin = validateOptions({ rateLimit })
    t.equal((validateRouteOptions({ cost: n }, 'GET /c', plugin) as { cost: number }).cost, n)
    isOptionError(t, thrown(() => validateRouteOptions({ cost: n + 1 }, 'GET /c', plugin)), 'config.admission of GET /c.cost', n + 1, `${n + 1} (number)`)
  }
  // Against the default rate limit.
  t.equal(validateOptions({ cost: 1000 }).cost, 1000)
  optionsRejected(t, { cost: 1001 }, 'cost', 1001, '1001 (number)')
  // No rate limit: any positive cost (it is only used by routes with their own limit).
  t.equal(validateOptions({ rateLimit: false, cost: 1_000_000 }).cost, 1_000_000)
  optionsRejected(t, { rateLimit: false, cost: 0 }, 'cost', 0, '0 (number)')
})

t.test("refusal: a body, or { body, limitStatusCode, fast }", async (t) => {
  const of = (refusal: unknown): unknown[] => { const s = validateOptions({ refusal }); return [s.responseBody, s.limitStatusCode, s.fastRefusals] }
  t.same(of(undefined), ['json', 429, 'shed'], 'the defaults')
  t.same(of('text'), ['text', 429, 'shed'], 'a body alone')
  t.same(of('error'), ['error', 429, false], "'error': never from bytes")
  t.same(of({}), ['json', 429, 'shed'])
  t.same(of({ body: 'problem', limitStatusCode: 503, fast: 'all' }), ['problem', 503, 'all'])
  t.same(of({ limitStatusCode: 429, fast: false }), ['json', 429, false])
  for (const [value, shown] of [[500, '500 (number)'], [200, '200 (number)'], [0, '0 (number)'], ['429', "'429' (string)"], [429.5, '429.5 (number)'], [NaN, 'NaN (number)'], [true, 'true (boolean)']] as Bad[]) {
    optionsRejected(t, { refusal: { limitStatusCode: value } }, 'refusal.limitStatusCode', value, shown)
  }
  t.match((thrown(() => validateOptions({ refusal: { limitStatusCode: 500 } })) as Error).message, '429 or 503')
  for (const [value, shown] of [['JSON', "'JSON'"], ['html', "'html'"], ['', "''"]] as Bad[]) {
    optionsRejected(t, { refusal: value }, 'refusal', value, shown)
    optionsRejected(t, { refusal: { body: value } }, 'refusal.body', value, shown)
  }
  for (const [value, shown] of [[1, '1 (number)'], [['json'], "[ 'json' ]"], [true, 'true']] as Bad[]) {
    optionsRejected(t, { refusal: value }, 'refusal', value, shown)
    optionsRejected(t, { refusal: { body: value } }, 'refusal.body', value, shown)
  }
  optionsRejected(t, { refusal: { fast: 'some' } }, 'refusal.fast', 'some', "'some' (string)")
  optionsRejected(t, { refusal: { body: 'error', fast: 'shed' } }, 'refusal.fast', 'shed', "'shed' (string)")
  optionsRejected(t, { refusal: { status: 503 } }, 'refusal.status', 503, '503 (number)')
})

t.test('an option of an earlier version is refused, naming where it went', async (t) => {
  for (const [options, path, value, place] of [
    [{ limitStatusCode: 503 }, 'options.limitStatusCode', 503, '`refusal: { limitStatusCode }`'],
    [{ responseBody: 'text' }, 'options.responseBody', 'text', "`refusal: 'json' | 'text' | 'problem' | 'error'` (or `refusal: { body }`)"],
    [{ fastRefusals: 'all' }, 'options.fastRefusals', 'all', '`refusal: { fast }`'],
    [{ allowList: ['10.0.0.1'], allowListSkipsShedding: true }, 'options.allowListSkipsShedding', true, '`allowList: { clients, skipsShedding: true }`'],
    [{ maxInFlight: 8, criticalReserve: 0.1 }, 'options.criticalReserve', 0.1, '`maxInFlight: { limit, criticalReserve }` (or in the adaptive or fleet object)'],
    [{ maxIdentities: 10 }, 'options.maxIdentities', 10, '`backend: memoryBackend({ maxIdentities })`']
  ] as Array<[Record<string, unknown>, string, unknown, string]>) {
    const error = thrown(() => validateOptions(options)) as AdmissionOptionError
    t.type(error, AdmissionOptionError, path)
    t.match(error, { code: 'ADMISSION_INVALID_OPTION', path, value }, path)
    t.ok(error.message.startsWith(`Expected \`${path}\` to be a known option (unknown option; moved to ${place}: `), error.message)
  }
})

t.test('headers: a boolean (or { partitionKey }: test/gate/ratelimit-fields.test.ts)', async (t) => {
  t.equal(validateOptions({ headers: true }).headers, true)
  t.equal(validateOptions({ headers: false }).headers, false)
  t.equal(validateOptions({ headers: undefined }).headers, true)
  for (const [value, shown] of [['true', "'true' (string)"], [1, '1 (number)'], [0, '0 (number)'], [[], '[]']] as Bad[]) {
    optionsRejected(t, { headers: value }, 'headers', value, shown)
  }
})

// An explicit `null` is a value, never a silent default.
t.test('null is refused for every option, never a silent default', async (t) => {
  for (const path of ['maxInFlight', 'cost', 'refusal', 'headers', 'key', 'ipv6Subnet', 'backend', 'onBackendError', 'onShed', 'onLimit']) {
    optionsRejected(t, { [path]: null }, path, null, 'null (null)')
  }
  rateRejected(t, null, 'rateLimit', null, `Expected \`rateLimit\` to be ${POLICY_SHAPE}, got null (null)`)
})

t.test('ipv6Subnet: 1 to 128', async (t) => {
  t.equal(validateOptions({ ipv6Subnet: 1 }).ipv6Subnet, 1)
  t.equal(validateOptions({ ipv6Subnet: 128 }).ipv6Subnet, 128)
  t.equal(validateOptions({ ipv6Subnet: 64 }).ipv6Subnet, 64)
  optionsRejected(t, { ipv6Subnet: 129 }, 'ipv6Subnet', 129, '129 (number)')
  optionsRejected(t, { ipv6Subnet: 256 }, 'ipv6Subnet', 256, '256 (number)')
  optionsRejected(t, { ipv6Subnet: 0 }, 'ipv6Subnet', 0, '0 (number)')
  optionsRejected(t, { ipv6Subnet: 56.5 }, 'ipv6Subnet', 56.5, '56.5 (number)')
  t.match((thrown(() => validateOptions({ ipv6Subnet: 129 })) as Error).message, 'a prefix length from 1 to 128')
})
/** An object with the shape of a `RatesBackend` that is not a memory backend. */
function customBackend (): RatesBackend {
  return {
    kind: 'custom',
    limiter () { throw new Error('not used') },
    async stop () {}
  }
}

t.test('backend: a memory backend (or another backend)', async (t) => {
  const backend = memoryBackend()
  t.ok(backend instanceof MemoryBackend)
  t.equal(validateOptions({ backend }).backend, backend)
  const bounded = new MemoryBackend({ maxIdentities: 3 })
  t.equal(validateOptions({ backend: bounded }).backend, bounded)
  t.equal(validateOptions({ backend: undefined }).backend, undefined)
  // Anything shaped like a RatesBackend (kind, limiter(), stop()) is taken as one.
  const custom = customBackend()
  t.equal(validateOptions({ backend: custom }).backend, custom)

  const noStop = { kind: 'x', limiter () {} }
  const numericKind = { kind: 1, limiter () {}, async stop () {} }
  const noLimiter = { kind: 'x', limiter: 'redis', async stop () {} }
  const stopValue = { kind: 'x', limiter () {}, stop: true }
  class Backend { kind = 'memory' }
  for (const [value, shown] of [
    [{}, '{}'],
    [true, 'true (boolean)'],
    [false, 'false (boolean)'],
    ['memory', "'memory' (string)"],
    [1, '1 (number)'],
    [memoryBackend, '[Function: memoryBackend] (function)'],
    [MemoryBackend, '[class MemoryBackend] (function)'],
    [new Backend(), "Backend { kind: 'memory' }"],
    [noStop, "{ kind: 'x', limiter: [Function: limiter] }"],
    [numericKind, '{ kind: 1, limiter: [Function: limiter], stop: [AsyncFunction: stop] }'],
    [noLimiter, "{ kind: 'x', limiter: 'redis', stop: [AsyncFunction: stop] }"],
    [stopValue, "{ kind: 'x', limiter: [Function: limiter], stop: true }"],
    [{ maxIdentities: 5 }, '{ maxIdentities: 5 }']
  ] as Bad[]) {
    optionsRejected(t, { backend: value }, 'backend', value, shown)
    t.match((thrown(() => validateOptions({ backend: value })) as Error).message, /to be a backend \{ kind, limiter\(\), stop\(\) \}/)
  }
})

t.test("onBackendError: 'deny' by default, or 'allow'", async (t) => {
  t.equal(validateOptions({}).onBackendError, 'deny')
  t.equal(validateOptions({ onBackendError: undefined }).onBackendError, 'deny')
  t.equal(validateOptions({ onBackendError: 'deny' }).onBackendError, 'deny')
  t.equal(validateOptions({ onBackendError: 'allow' }).onBackendError, 'allow')
  for (const [value, shown] of [['Allow', "'Allow' (string)"], ['fail-open', "'fail-open' (string)"], [true, 'true (boolean)'], [0, '0 (number)'], [['allow'], "[ 'allow' ]"]] as Bad[]) {
    optionsRejected(t, { onBackendError: value }, 'onBackendError', value, shown)
  }
  t.match((thrown(() => validateOptions({ onBackendError: 'x' })) as Error).message, "'deny' or 'allow'")
})

t.test('key, onShed, onLimit: functions', async (t) => {
  for (const path of ['key', 'onShed', 'onLimit']) {
    t.equal(validateOptions({ [path]: undefined })[path as keyof Settings], undefined, `${path} may be absent`)
    for (const [value, shown] of [['ip', "'ip' (string)"], [null, 'null (null)'], [{}, '{}'], [1, '1 (number)'], [true, 'true (boolean)'], [[() => 'k'], '[ [Function (anonymous)] ]']] as Bad[]) {
      optionsRejected(t, { [path]: value }, path, value, shown)
    }
    t.match((thrown(() => validateOptions({ [path]: 'x' })) as Error).message, 'a function')
  }
})

t.test('the message of every kind of value is one short line', async (t) => {
  const long = 'x'.repeat(500)
  const error = thrown(() => validateOptions({ refusal: long })) as AdmissionOptionError
  t.equal(error.value, long)
  t.ok(error.message.length < 200, `short: ${error.message.length}`)
  t.notOk(error.message.includes('\n'))
  const deep = { a: { b: { c: { d: 1 } } } }
  const nested = thrown(() => validateOptions({ enforce: deep })) as AdmissionOptionError
  t.match(nested.message, '{ a: { b: [Object] } }')
  t.notOk(nested.message.includes('\n'))
  const multiline = thrown(() => validateOptions({ refusal: 'a\nb' })) as AdmissionOptionError
  t.notOk(multiline.message.includes('\n'), 'a newline in the value is escaped')
  t.equal(ExportedOptionError, AdmissionOptionError, 'the class the package exports')
})

// ---------------------------------------------------------------------------------------------
// validateRouteOptions

const PLUGIN = validateOptions({ rateLimit: { limit: 10, windowMs: 1000 }, cost: 2 })
const WHERE = 'GET /x'
const PREFIX = `config.admission of ${WHERE}`

const routeRejected = (t: Test, value: unknown, path: string, bad: unknown, shown: string, plugin: Settings = PLUGIN): void => {
  const error = thrown(() => validateRouteOptions(value, WHERE, plugin))
  isOptionError(t, error, `${PREFIX}${path}`, bad, shown)
  if (error instanceof Error) t.match(error.message, 'GET /x', 'the message names the route')
}

/** A route's `rateLimit` is refused with the validator's message (under the route's path). */
const routeRateRejected = (t: Test, rateLimit: unknown, path: string, value: unknown): void => {
  const expected = validatorMessage(rateLimit, `${PREFIX}.rateLimit`)
  t.match(expected, `\`${PREFIX}.rateLimit`, 'the validator names the route')
  isPolicyError(t, thrown(() => validateRouteOptions({ rateLimit }, WHERE, PLUGIN)), `${PREFIX}${path}`, value, expected)
}

t.test('route: false opts out; an empty object takes the plugin limiter and cost', async (t) => {
  t.equal(validateRouteOptions(false, WHERE, PLUGIN), false)
  const r = validateRouteOptions({}, WHERE, PLUGIN)
  t.strictSame({ ...r }, { maxInFlight: false, rateLimit: undefined, cost: 2, ...ROUTE_OUT })
  t.ok(Object.isFrozen(r))
  t.strictSame({ ...validateRouteOptions(Object.create(null), WHERE, PLUGIN) }, { maxInFlight: false, rateLimit: undefined, cost: 2, ...ROUTE_OUT })
})

t.test('route: overrides', async (t) => {
  const r = validateRouteOptions({ maxInFlight: 8, rateLimit: { limit: 10, windowMs: 1_000 }, cost: 2, ...ROUTE_REST }, WHERE, PLUGIN)
  t.same(r, { maxInFlight: 8, rateLimit: { algorithm: 'token-bucket', limit: 10, windowMs: 1000, burst: 10 }, cost: 2, ...ROUTE_OUT })
  t.ok(r !== false && r.rateLimit !== undefined && Object.isFrozen(r.rateLimit))
  t.same(validateRouteOptions({ maxInFlight: false }, WHERE, PLUGIN), { maxInFlight: false, rateLimit: undefined, cost: 2, ...ROUTE_OUT })
  t.same(validateRouteOptions({ rateLimit: false }, WHERE, PLUGIN), { maxInFlight: false, rateLimit: false, cost: 2, ...ROUTE_OUT })
  t.same(validateRouteOptions({ cost: 10 }, WHERE, PLUGIN), { maxInFlight: false, rateLimit: undefined, cost: 10, ...ROUTE_OUT })
  t.same(validateRouteOptions({ rateLimit: { limit: 1, windowMs: 1, burst: 50 }, cost: 50 }, WHERE, PLUGIN),
    { maxInFlight: false, rateLimit: { algorithm: 'token-bucket', limit: 1, windowMs: 1, burst: 50 }, cost: 50, ...ROUTE_OUT }, 'a route burst above the plugin\'s')
  // A route may use another algorithm than the plugin.
  const windowed = validateRouteOptions({ rateLimit: { algorithm: 'sliding-window-counter', limit: 4, windowMs: 500 } }, WHERE, PLUGIN)
  t.ok(windowed !== false && windowed.rateLimit !== undefined && windowed.rateLimit !== false)
  t.strictSame(windowed !== false && windowed.rateLimit ? { ...windowed.rateLimit } : undefined, { algorithm: 'sliding-window-counter', limit: 4, windowMs: 500 })
})

t.test('route: the value must be false or a plain object', async (t) => {
  class Admission { cost = 1 }
  const instance = new Admission()
  for (const [value, shown] of [[true, 'true (boolean)'], [null, 'null (null)'], [0, '0 (number)'], ['off', "'off' (string)"], [[], '[]'], [instance, 'Admission'], [() => ({}), '[Function (anonymous)] (function)']] as Bad[]) {
    routeRejected(t, value, '', value, shown)
  }
  t.match((thrown(() => validateRouteOptions(true, WHERE, PLUGIN)) as Error).message, 'an object { maxInFlight?, rateLimit?, cost?, hook?, enforce?, errorResponseBuilder?, allowList?, onBackendError?, priority?, groupId?, count?, failed?, charge?, longLived?, maxLongLived?, clientInFlight? } or false')
})

t.test('route: unknown keys, including plugin-only options and register keys', async (t) => {
  const sym = Symbol('s')
  const backend = memoryBackend()
  for (const [key, value, shown] of [
    ['limitStatusCode', 503, '503 (number)'],
    ['key', 'ip', "'ip' (string)"],
    ['headers', false, 'false (boolean)'],
    ['maxIdentities', 5, '5 (number)'],
    ['backend', backend, 'MemoryBackend'],
    ['prefix', '/x', "'/x' (string)"],
    ['limit', 5, '5 (number)'],
    ['algorithm', 'gcra', "'gcra' (string)"],
    ['maxinflight', 5, '5 (number)']
  ] as Array<[string, unknown, string]>) {
    routeRejected(t, { [key]: value }, `.${key}`, value, shown)
  }
  routeRejected(t, { [sym]: 1 }, '.Symbol(s)', 1, '1 (number)')
  routeRateRejected(t, { limit: 1, windowMs: 1, extra: 2 }, '.rateLimit.extra', 'extra')
  routeRateRejected(t, { limit: 1, windowMs: 1, [sym]: 2 }, '.rateLimit[Symbol(s)]', sym)
})

t.test('route: numbers', async (t) => {
  for (const [value, shown] of NOT_POSITIVE_INTEGERS) {
    if (value !== false) routeRejected(t, { maxInFlight: value }, '.maxInFlight', value, shown)
    routeRejected(t, { cost: value }, '.cost', value, shown)
    routeRejected(t, { rateLimit: { limit: value, windowMs: 1000 } }, '.rateLimit.limit', value, shown)
    routeRejected(t, { rateLimit: { limit: 5, windowMs: value } }, '.rateLimit.windowMs', value, shown)
    routeRejected(t, { rateLimit: { limit: 5, windowMs: 1000, burst: value } }, '.rateLimit.burst', value, shown)
    routeRejected(t, { rateLimit: { algorithm: 'fixed-window', limit: value, windowMs: 1000 } }, '.rateLimit.limit', value, shown)
  }
  routeRejected(t, { maxInFlight: true }, '.maxInFlight', true, 'true (boolean)')
  routeRateRejected(t, true, '.rateLimit', true)
  routeRateRejected(t, null, '.rateLimit', null)
  routeRateRejected(t, { limit: 1, windowMs: 2 ** 20, burst: 2 ** 33 }, '.rateLimit', { algorithm: 'token-bucket', limit: 1, windowMs: 2 ** 20, burst: 2 ** 33 })
  routeRateRejected(t, { algorithm: 'leaky-bucket', limit: 1, windowMs: 1 }, '.rateLimit.algorithm', 'leaky-bucket')
})

// Regression: a route's cost was read as `input.cost ?? plugin.cost`, so `cost: null` on a route
// silently became the plugin's cost.
t.test('route: cost null is refused, never a silent default', async (t) => {
  routeRejected(t, { cost: null }, '.cost', null, 'null (null)')
})

t.test('route: cost against the policy it takes from', async (t) => {
  // The plugin's policy (capacity 10) when the route has none of its own.
  t.equal((validateRouteOptions({ cost: 10 }, WHERE, PLUGIN) as { cost: number }).cost, 10)
  routeRejected(t, { cost: 11 }, '.cost', 11, '11 (number)')
  t.match((thrown(() => validateRouteOptions({ cost: 11 }, WHERE, PLUGIN)) as Error).message, "at most the policy's capacity (10)")
  // The route's own policy.
  routeRejected(t, { rateLimit: { limit: 3, windowMs: 1000 }, cost: 4 }, '.cost', 4, '4 (number)')
  routeRejected(t, { rateLimit: { limit: 30, windowMs: 1000, burst: 3 }, cost: 4 }, '.cost', 4, '4 (number)')
  routeRejected(t, { rateLimit: { algorithm: 'fixed-window', limit: 3, windowMs: 1000 }, cost: 4 }, '.cost', 4, '4 (number)')
  // A route whose own small policy cannot pay the plugin's cost (2).
  routeRejected(t, { rateLimit: { limit: 1, windowMs: 1000 } }, '.cost', 2, '2 (number)')
  t.match((thrown(() => validateRouteOptions({ rateLimit: { limit: 1, windowMs: 1000 } }, WHERE, PLUGIN)) as Error).message, "at most the policy's capacity (1)")
  routeRejected(t, { rateLimit: { algorithm: 'sliding-window-counter', limit: 1, windowMs: 1000 } }, '.cost', 2, '2 (number)')
  routeRejected(t, { rateLimit: { algorithm: 'gcra', limit: 10, windowMs: 1000, burst: 1 } }, '.cost', 2, '2 (number)')
  t.same(validateRouteOptions({ rateLimit: { limit: 1, windowMs: 1000 }, cost: 1 }, WHERE, PLUGIN),
    { maxInFlight: false, rateLimit: { algorithm: 'token-bucket', limit: 1, windowMs: 1000, burst: 1 }, cost: 1, ...ROUTE_OUT }, 'unless it sets its own cost')
  // No policy at all: a cost is a mistake (it has nothing to take from).
  routeRejected(t, { rateLimit: false, cost: 1e9 }, '.cost', 1e9, '1000000000 (number)')
  t.match((thrown(() => validateRouteOptions({ rateLimit: false, cost: 1 }, WHERE, PLUGIN)) as Error).message, 'absent where there is no rate limit')
  const noLimit = validateOptions({ rateLimit: false, cost: 50 })
  t.same(validateRouteOptions({}, WHERE, noLimit), { maxInFlight: false, rateLimit: undefined, cost: 50, ...ROUTE_OUT })
  routeRejected(t, { cost: 1e9 }, '.cost', 1e9, '1000000000 (number)', noLimit)
  // ...but a route with its own policy must be able to pay the plugin's cost.
  const error = thrown(() => validateRouteOptions({ rateLimit: { limit: 10, windowMs: 1000 } }, 'POST /upload', noLimit))
  isOptionError(t, error, 'config.admission of POST /upload.cost', 50, '50 (number)')
})

// ---------------------------------------------------------------------------------------------
// Through the plugin.

/**
 * Registers the plugin with `options` and returns what `ready()` rejects with. A short plugin
 * timeout: a registration that throws instead of failing would otherwise hang 10 s.
 */
async function registrationError (options: unknown): Promise<unknown> {
  const app = Fastify({ pluginTimeout: 500 })
  app.register(admission, options as AdmissionOptions)
  const error = await app.ready().then(() => undefined, (e: unknown) => e)
  await app.close().catch(() => {})
  return error
}

t.test('plugin: bad options fail registration with the typed error', async (t) => {
  class Options { maxInFlight = 1 }
  const instance = new Options()
  const sym = Symbol('x')
  const onShed = {}
  const notABackend = { kind: 'memory' }
  const backend = memoryBackend()
  const cases: Array<[options: unknown, path: string, value: unknown, shown: string]> = [
    [{ maxInFlightt: 1 }, 'options.maxInFlightt', 1, '1 (number)'],
    [{ [sym]: 1 }, 'options.Symbol(x)', 1, '1 (number)'],
    [instance, 'options', instance, 'Options'],
    [{ maxInFlight: 0 }, 'maxInFlight', 0, '0 (number)'],
    [{ maxInFlight: true }, 'maxInFlight', true, 'true (boolean)'],
    [{ maxInFlight: -5 }, 'maxInFlight', -5, '-5 (number)'],
    [{ rateLimit: true }, 'rateLimit', true, 'true (boolean)'],
    [{ rateLimit: { limit: 1.5, windowMs: 1000 } }, 'rateLimit.limit', 1.5, '1.5 (number)'],
    [{ rateLimit: { limit: 10, windowMs: NaN } }, 'rateLimit.windowMs', NaN, 'NaN (number)'],
    [{ rateLimit: { limit: 10, windowMs: 1000, burst: Infinity } }, 'rateLimit.burst', Infinity, 'Infinity (number)'],
    [{ rateLimit: { limit: 10, windowMs: 1000, burst: '5' } }, 'rateLimit.burst', '5', "'5' (string)"],
    [{ rateLimit: { algorithm: 'leaky-bucket', limit: 10, windowMs: 1000 } }, 'rateLimit.algorithm', 'leaky-bucket', "'leaky-bucket' (string)"],
    [{ rateLimit: { algorithm: 'fixed-window', limit: 10, windowMs: 1000, burst: 5 } }, 'rateLimit.burst', 5, '5 (number)'],
    [{ rateLimit: { limit: 10, windowMs: 1000, burst: 3 }, cost: 4 }, 'cost', 4, '4 (number)'],
    [{ rateLimit: { algorithm: 'sliding-window-counter', limit: 10, windowMs: 1000 }, cost: 11 }, 'cost', 11, '11 (number)'],
    [{ cost: 0 }, 'cost', 0, '0 (number)'],
    [{ refusal: { limitStatusCode: 500 } }, 'refusal.limitStatusCode', 500, '500 (number)'],
    [{ refusal: 'html' }, 'refusal', 'html', "'html' (string)"],
    [{ headers: 'yes' }, 'headers', 'yes', "'yes' (string)"],
    [{ ipv6Subnet: 129 }, 'ipv6Subnet', 129, '129 (number)'],
    [{ ipv6Subnet: 0 }, 'ipv6Subnet', 0, '0 (number)'],
    [{ maxIdentities: -1 }, 'options.maxIdentities', -1, '-1 (number)'],
    [{ backend: notABackend }, 'backend', notABackend, "{ kind: 'memory' }"],
    [{ onBackendError: 'open' }, 'onBackendError', 'open', "'open' (string)"],
    [{ key: 'ip' }, 'key', 'ip', "'ip' (string)"],
    [{ onShed }, 'onShed', onShed, '{}'],
    [{ onLimit: 1 }, 'onLimit', 1, '1 (number)']
  ]
  for (const [options, path, value, shown] of cases) {
    isOptionError(t, await registrationError(options), path, value, shown, 'register: ')
  }
  // The rates validator's own complaints, as they come out of registration.
  const policyCases: Array<[rateLimit: unknown, path: string, value: unknown]> = [
    [{ limit: 1, windowMs: 1, max: 1 }, 'rateLimit.max', 'max'],
    [{ limit: 1, windowMs: 2 ** 30, burst: 2 ** 30 }, 'rateLimit', { algorithm: 'token-bucket', limit: 1, windowMs: 2 ** 30, burst: 2 ** 30 }],
    [{ algorithm: 'gcra', limit: 3000, windowMs: 1 }, 'rateLimit', { algorithm: 'gcra', limit: 3000, windowMs: 1, burst: 3000 }]
  ]
  for (const [rateLimit, path, value] of policyCases) {
    isPolicyError(t, await registrationError({ rateLimit }), path, value, validatorMessage(rateLimit), 'register: ')
  }
})

t.test("plugin: Fastify's register keys are accepted", async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { prefix: '/api', logLevel: 'warn', rateLimit: { limit: 1, windowMs: 60_000 } })
  app.get('/x', async () => 'ok')
  await app.ready()
  t.equal((await app.inject('/x')).statusCode, 200)
  t.equal((await app.inject('/x')).statusCode, 429, 'and the other options took effect')
})

t.test('plugin: each algorithm limits requests', async (t) => {
  for (const algorithm of ALGORITHMS) {
    const app = Fastify()
    await app.register(admission, { rateLimit: { algorithm, limit: 2, windowMs: 60_000 } })
    app.get('/x', async () => 'ok')
    const statuses: number[] = []
    for (let i = 0; i < 3; i++) statuses.push((await app.inject('/x')).statusCode)
    t.same(statuses, [200, 200, 429], algorithm)
    await app.close()
  }
})

/** Status and Retry-After of one request per client address, in order; and the identities tracked. */
async function clients (options: AdmissionOptions, ips: string[]): Promise<{ answers: string[], identities: number }> {
  const app = Fastify()
  await app.register(admission, options)
  app.get('/x', async () => 'ok')
  await app.ready()
  const answers: string[] = []
  for (const ip of ips) {
    const response = await app.inject({ url: '/x', remoteAddress: ip })
    const retry = response.headers['retry-after']
    answers.push(retry === undefined ? `${response.statusCode}` : `${response.statusCode} ${String(retry)}`)
  }
  const identities = app.admission.stats().identities
  await app.close()
  return { answers, identities }
}

t.test('plugin: memoryBackend({ maxIdentities }) bounds the clients tracked', async (t) => {
  const rateLimit = { limit: 1, windowMs: 60_000 } // a client's state is live for a minute
  const two = await clients({ rateLimit, backend: memoryBackend({ maxIdentities: 2 }) }, ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.1'])
  t.same(two.answers, ['200', '200', '503 60', '429 60'], 'the third client is refused until a state recovers')
  t.equal(two.identities, 2)
  const one = await clients({ rateLimit, backend: memoryBackend({ maxIdentities: 1 }) }, ['10.0.0.1', '10.0.0.2'])
  t.same(one.answers, ['200', '503 60'])
  t.equal(one.identities, 1)
  const roomy = await clients({ rateLimit, backend: memoryBackend({ maxIdentities: 3 }) }, ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4'])
  t.same(roomy.answers, ['200', '200', '200', '503 60'])
})

t.test('plugin: no bound given: the memory backend reads RATES_MAX_IDENTITIES, else 1 000 000', async (t) => {
  const saved = process.env.RATES_MAX_IDENTITIES
  t.teardown(() => {
    if (saved === undefined) delete process.env.RATES_MAX_IDENTITIES
    else process.env.RATES_MAX_IDENTITIES = saved
  })
  const rateLimit = { limit: 1, windowMs: 60_000 }
  delete process.env.RATES_MAX_IDENTITIES
  t.equal(memoryBackend().maxIdentities, 1_000_000)
  t.same((await clients({ rateLimit }, ['10.0.0.1', '10.0.0.2', '10.0.0.3'])).answers, ['200', '200', '200'])
  process.env.RATES_MAX_IDENTITIES = '1'
  t.same((await clients({ rateLimit }, ['10.0.0.1', '10.0.0.2'])).answers, ['200', '503 60'], 'the variable bounds the default backend')
  t.same((await clients({ rateLimit, backend: memoryBackend({ maxIdentities: 2 }) }, ['10.0.0.1', '10.0.0.2', '10.0.0.3'])).answers, ['200', '200', '503 60'], 'the backend\'s own bound wins over the variable')
  // An invalid value fails at startup and names the variable.
  for (const value of ['0', '-1', '1.5', 'many', '1e6', ' 5', '']) {
    process.env.RATES_MAX_IDENTITIES = value
    const error = await registrationError({ rateLimit })
    t.ok(error instanceof RatesInvalidArgumentError, `${JSON.stringify(value)}: RatesInvalidArgumentError`)
    t.equal((error as RatesInvalidArgumentError).path, 'RATES_MAX_IDENTITIES')
    t.match((error as Error).message, /`RATES_MAX_IDENTITIES`/)
  }
  process.env.RATES_MAX_IDENTITIES = 'many'
  t.equal(await registrationError({ rateLimit, backend: memoryBackend({ maxIdentities: 5 }) }), undefined, 'not read when the backend is given its bound')
})

async function routeFails (t: Test, register: (app: FastifyInstance) => void, path: string, value: unknown, shown: string, route: string): Promise<void> {
  const app = Fastify()
  await app.register(admission, { rateLimit: { limit: 10, windowMs: 1000 }, cost: 2 })
  register(app)
  const error = await app.ready().then(() => undefined, (e: unknown) => e)
  isOptionError(t, error, path, value, shown, 'route: ')
  t.ok(error instanceof Error && error.message.includes(route), `the message names ${route}`)
  await app.close().catch(() => {})
}

t.test('plugin: a bad route config fails at ready() and names the route', async (t) => {
  const h = async (): Promise<string> => 'ok'
  await routeFails(t, (app) => app.get('/x', { config: { admission: { cost: 0 } } }, h),
    'config.admission of GET /x.cost', 0, '0 (number)', 'GET /x')
  await routeFails(t, (app) => app.post('/y', { config: { admission: { maxInFlight: 2.5 } } }, h),
    'config.admission of POST /y.maxInFlight', 2.5, '2.5 (number)', 'POST /y')
  await routeFails(t, (app) => app.get('/z', { config: { admission: { rateLimit: { limit: 0, windowMs: 1 } } } }, h),
    'config.admission of GET /z.rateLimit.limit', 0, '0 (number)', 'GET /z')
  await routeFails(t, (app) => app.get('/a', { config: { admission: { rateLimit: { algorithm: 'gcra' as never, limit: 5, windowMs: 1, burst: 0 } } } }, h),
    'config.admission of GET /a.rateLimit.burst', 0, '0 (number)', 'GET /a')
  await routeFails(t, (app) => app.get('/w', { config: { admission: { rateLimit: { algorithm: 'fixed-window', limit: 5, windowMs: 1000, burst: 5 } } } }, h),
    'config.admission of GET /w.rateLimit.burst', 5, '5 (number)', 'GET /w')
  await routeFails(t, (app) => app.get('/u', { config: { admission: { maxInflight: 3 } as never } }, h),
    'config.admission of GET /u.maxInflight', 3, '3 (number)', 'GET /u')
  await routeFails(t, (app) => app.get('/t', { config: { admission: true as never } }, h),
    'config.admission of GET /t', true, 'true (boolean)', 'GET /t')
  await routeFails(t, (app) => app.get('/n', { config: { admission: null as never } }, h),
    'config.admission of GET /n', null, 'null (null)', 'GET /n')
  // A cost above the plugin's capacity, and a route policy too small for the plugin's cost.
  await routeFails(t, (app) => app.get('/big', { config: { admission: { cost: 11 } } }, h),
    'config.admission of GET /big.cost', 11, '11 (number)', 'GET /big')
  await routeFails(t, (app) => app.get('/small', { config: { admission: { rateLimit: { limit: 1, windowMs: 1000 } } } }, h),
    'config.admission of GET /small.cost', 2, '2 (number)', 'GET /small')
  await routeFails(t, (app) => app.get('/window', { config: { admission: { rateLimit: { algorithm: 'sliding-window-counter', limit: 1, windowMs: 1000 } } } }, h),
    'config.admission of GET /window.cost', 2, '2 (number)', 'GET /window')
  // Several methods, and a prefix.
  await routeFails(t, (app) => app.route({ method: ['GET', 'POST'], url: '/m', config: { admission: { cost: -1 } }, handler: h }),
    'config.admission of GET,POST /m.cost', -1, '-1 (number)', 'GET,POST /m')
  await routeFails(t, (app) => app.register(async (child) => {
    child.get('/p', { config: { admission: { cost: 'x' as never } } }, h)
  }, { prefix: '/v1' }), 'config.admission of GET /v1/p.cost', 'x', "'x' (string)", 'GET /v1/p')
  // The first bad route is reported even when a later one is valid.
  await routeFails(t, (app) => {
    app.get('/bad', { config: { admission: { cost: 1.5 } } }, h)
    app.get('/good', { config: { admission: { cost: 1 } } }, h)
  }, 'config.admission of GET /bad.cost', 1.5, '1.5 (number)', 'GET /bad')
})

t.test('plugin: valid route configs are accepted', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: { limit: 10, windowMs: 1000 }, cost: 2 })
  const h = async (): Promise<string> => 'ok'
  app.get('/a', { config: { admission: false } }, h)
  app.get('/b', { config: { admission: {} } }, h)
  app.get('/c', { config: { admission: { maxInFlight: 8, rateLimit: { limit: 10, windowMs: 1_000 }, cost: 2 } } }, h)
  app.get('/d', { config: { admission: { rateLimit: false } } }, h)
  app.get('/e', { config: { admission: { rateLimit: { limit: 1, windowMs: 1000 }, cost: 1 } } }, h)
  app.get('/f', { config: { other: 1 } as never }, h)
  app.get('/g', { config: { admission: { rateLimit: { algorithm: 'fixed-window', limit: 2, windowMs: 1000 } } } }, h)
  app.get('/h', { config: { admission: { rateLimit: { algorithm: 'sliding-window-counter', limit: 2, windowMs: 1000 } } } }, h)
  app.get('/i', { config: { admission: { rateLimit: { algorithm: 'gcra', limit: 1, windowMs: 1000, burst: 2 } } } }, h)
  await app.ready()
  for (const url of ['/a', '/b', '/c', '/d', '/e', '/f', '/g', '/h', '/i']) t.equal((await app.inject(url)).statusCode, 200, url)
})
