import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import {
  validateOptions,
  validateRouteOptions,
  DEFAULT_RATE_LIMIT,
  DEFAULT_IPV6_SUBNET,
  DEFAULT_MAX_IDENTITIES,
  type Settings
} from '../lib/options.js'
import { AdmissionError, AdmissionOptionError } from '../lib/errors.js'
import admission, { AdmissionOptionError as ExportedOptionError } from '../lib/index.js'
import type { AdmissionOptions } from '../lib/index.js'

const MAX = Number.MAX_SAFE_INTEGER

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

// A valid rate limit to vary one field of.
const RL = { limit: 10, windowMs: 1000, burst: 5 }

// ---------------------------------------------------------------------------------------------
// validateOptions

t.test('defaults', async (t) => {
  for (const options of [undefined, {}, Object.create(null) as object]) {
    const s = validateOptions(options)
    t.same(s, {
      maxInFlight: false,
      rateLimit: { limit: 1000, windowMs: 60_000, burst: 1000 },
      cost: 1,
      limitStatusCode: 429,
      responseBody: 'json',
      headers: true,
      key: undefined,
      ipv6Subnet: 56,
      maxIdentities: 1_000_000,
      onShed: undefined,
      onLimit: undefined
    })
    t.ok(Object.isFrozen(s), 'settings are frozen')
    t.ok(Object.isFrozen(s.rateLimit))
  }
  t.equal(DEFAULT_IPV6_SUBNET, 56)
  t.equal(DEFAULT_MAX_IDENTITIES, 1_000_000)
  t.same(DEFAULT_RATE_LIMIT, { limit: 1000, windowMs: 60_000, burst: 1000 })
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
    limitStatusCode: 503,
    responseBody: 'text',
    headers: false,
    key,
    ipv6Subnet: 64,
    maxIdentities: 10,
    onShed,
    onLimit
  })
  t.same(s, {
    maxInFlight: 512,
    rateLimit: { limit: 100, windowMs: 60_000, burst: 20 },
    cost: 20,
    limitStatusCode: 503,
    responseBody: 'text',
    headers: false,
    key,
    ipv6Subnet: 64,
    maxIdentities: 10,
    onShed,
    onLimit
  })
  t.equal(s.key, key)
  t.equal(s.onShed, onShed)
  t.equal(s.onLimit, onLimit)
  // Other kinds of functions are functions too.
  t.equal(validateOptions({ key: async function () { return 'k' } }).key?.constructor.name, 'AsyncFunction')
  const Bound = function (this: unknown): string { return 'k' }.bind(null)
  t.equal(validateOptions({ key: Bound }).key, Bound)
})

t.test('a null-prototype object is a plain object', async (t) => {
  const options = Object.assign(Object.create(null) as object, {
    maxInFlight: 3,
    rateLimit: Object.assign(Object.create(null) as object, { limit: 4, windowMs: 5 })
  })
  const s = validateOptions(options)
  t.equal(s.maxInFlight, 3)
  t.same(s.rateLimit, { limit: 4, windowMs: 5, burst: 4 })
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
  optionsRejected(t, { rateLimit: { ...RL, max: 3 } }, 'rateLimit.max', 3, '3 (number)')
  optionsRejected(t, { rateLimit: { ...RL, cost: 3 } }, 'rateLimit.cost', 3, '3 (number)')
  optionsRejected(t, { rateLimit: { ...RL, timeWindow: '1 minute' } }, 'rateLimit.timeWindow', '1 minute', "'1 minute' (string)")
  // Keys that are not enumerable are still keys.
  const hidden = Object.defineProperty({}, 'secret', { value: 1, enumerable: false })
  optionsRejected(t, hidden, 'options.secret', 1, '1 (number)')
  // Keys that look like prototype keys.
  const proto = JSON.parse('{"__proto__": {"maxInFlight": 1}}') as object
  optionsRejected(t, proto, 'options.__proto__', (proto as Record<string, unknown>).__proto__, '{ maxInFlight: 1 }')
  // The message lists what is known.
  const error = thrown(() => validateOptions({ nope: 1 })) as Error
  t.match(error.message, /one of maxInFlight, rateLimit, cost, limitStatusCode, responseBody, headers, key, ipv6Subnet, maxIdentities, onShed, onLimit/)
  const nested = thrown(() => validateOptions({ rateLimit: { ...RL, nope: 1 } })) as Error
  t.match(nested.message, /one of limit, windowMs, burst \(unknown option\)/)
})

t.test('symbol keys are refused', async (t) => {
  const sym = Symbol('tuning')
  optionsRejected(t, { [sym]: 7 }, 'options.Symbol(tuning)', 7, '7 (number)')
  optionsRejected(t, { rateLimit: { ...RL, [sym]: 'x' } }, 'rateLimit.Symbol(tuning)', 'x', "'x' (string)")
  const hidden = Object.defineProperty({}, sym, { value: 1, enumerable: false })
  optionsRejected(t, hidden, 'options.Symbol(tuning)', 1, '1 (number)')
})

t.test("Fastify's own register keys are accepted", async (t) => {
  const s = validateOptions({ prefix: '/api', logLevel: 'warn', logSerializers: {}, maxInFlight: 2 })
  t.equal(s.maxInFlight, 2)
  t.notOk('prefix' in s)
  // ...but only at the top: not inside rateLimit.
  optionsRejected(t, { rateLimit: { ...RL, prefix: '/x' } }, 'rateLimit.prefix', '/x', "'/x' (string)")
})

t.test('numbers must be positive safe integers', async (t) => {
  const fields: Array<[path: string, build: (v: unknown) => unknown]> = [
    ['rateLimit.limit', (v) => ({ rateLimit: { ...RL, limit: v } })],
    ['rateLimit.windowMs', (v) => ({ rateLimit: { ...RL, windowMs: v } })],
    ['rateLimit.burst', (v) => ({ rateLimit: { ...RL, burst: v } })],
    ['cost', (v) => ({ rateLimit: RL, cost: v })],
    ['ipv6Subnet', (v) => ({ ipv6Subnet: v })],
    ['maxIdentities', (v) => ({ maxIdentities: v })],
    ['maxInFlight', (v) => ({ maxInFlight: v })]
  ]
  for (const [path, build] of fields) {
    for (const [value, shown] of NOT_POSITIVE_INTEGERS) {
      if (path === 'maxInFlight' && value === false) continue // false: no shedding
      optionsRejected(t, build(value), path, value, shown)
    }
    const error = thrown(() => validateOptions(build(0))) as Error
    t.match(error.message, path === 'maxInFlight' ? 'a positive safe integer or false' : 'a positive safe integer', `${path}: what is expected`)
  }
  // The largest values are fine.
  t.equal(validateOptions({ maxIdentities: MAX }).maxIdentities, MAX)
  t.equal(validateOptions({ maxInFlight: MAX }).maxInFlight, MAX)
  t.equal(validateOptions({ maxInFlight: 1 }).maxInFlight, 1)
  t.same(validateOptions({ rateLimit: { limit: MAX, windowMs: 1 } }).rateLimit, { limit: MAX, windowMs: 1, burst: MAX })
})

t.test('maxInFlight: a positive integer or false', async (t) => {
  t.equal(validateOptions({ maxInFlight: false }).maxInFlight, false)
  t.equal(validateOptions({ maxInFlight: 8 }).maxInFlight, 8)
  t.equal(validateOptions({ maxInFlight: undefined }).maxInFlight, false)
  optionsRejected(t, { maxInFlight: true }, 'maxInFlight', true, 'true (boolean)')
  optionsRejected(t, { maxInFlight: 'false' }, 'maxInFlight', 'false', "'false' (string)")
  optionsRejected(t, { maxInFlight: 0 }, 'maxInFlight', 0, '0 (number)')
})

t.test('rateLimit: an object or false', async (t) => {
  t.equal(validateOptions({ rateLimit: false }).rateLimit, false)
  t.equal(validateOptions({ rateLimit: undefined }).rateLimit, DEFAULT_RATE_LIMIT)
  class Limit { limit = 1; windowMs = 1 }
  const limit = new Limit()
  for (const [value, shown] of [[true, 'true (boolean)'], [null, 'null (null)'], [0, '0 (number)'], ['100/min', "'100/min' (string)"], [[1, 1000], '[ 1, 1000 ]'], [limit, 'Limit']] as Bad[]) {
    optionsRejected(t, { rateLimit: value }, 'rateLimit', value, shown)
  }
  const error = thrown(() => validateOptions({ rateLimit: true })) as Error
  t.match(error.message, 'an object { limit, windowMs, burst? } or false')
  // limit and windowMs are required.
  optionsRejected(t, { rateLimit: {} }, 'rateLimit.limit', undefined, 'undefined (undefined)')
  optionsRejected(t, { rateLimit: { limit: 5 } }, 'rateLimit.windowMs', undefined, 'undefined (undefined)')
  optionsRejected(t, { rateLimit: { windowMs: 5 } }, 'rateLimit.limit', undefined, 'undefined (undefined)')
})

t.test('burst defaults to limit', async (t) => {
  const s = validateOptions({ rateLimit: { limit: 7, windowMs: 1000 } })
  t.same(s.rateLimit, { limit: 7, windowMs: 1000, burst: 7 })
  t.same(validateOptions({ rateLimit: { limit: 7, windowMs: 1000, burst: undefined } }).rateLimit, { limit: 7, windowMs: 1000, burst: 7 })
  t.same(validateOptions({ rateLimit: { limit: 7, windowMs: 1000, burst: 70 } }).rateLimit, { limit: 7, windowMs: 1000, burst: 70 })
  t.same(validateOptions({ rateLimit: { limit: 7, windowMs: 1000, burst: 1 } }).rateLimit, { limit: 7, windowMs: 1000, burst: 1 })
})

t.test('burst × windowMs must stay a safe integer', async (t) => {
  const windowMs = 1_000_000
  const most = Math.floor(MAX / windowMs) // 9 007 199 254
  t.same(validateOptions({ rateLimit: { limit: 1, windowMs, burst: most } }).rateLimit, { limit: 1, windowMs, burst: most })
  optionsRejected(t, { rateLimit: { limit: 1, windowMs, burst: most + 1 } }, 'rateLimit.burst', most + 1, `${most + 1} (number)`)
  const error = thrown(() => validateOptions({ rateLimit: { limit: 1, windowMs, burst: most + 1 } })) as Error
  t.match(error.message, `at most ${most} with windowMs ${windowMs}`)
  // The product exactly at the bound: 2^53 - 1 = 6361 × 69431 × 20394401.
  t.equal(6361 * 69431 * 20394401, MAX)
  t.same(validateOptions({ rateLimit: { limit: 3, windowMs: 6361 * 69431, burst: 20394401 } }).rateLimit,
    { limit: 3, windowMs: 6361 * 69431, burst: 20394401 })
  optionsRejected(t, { rateLimit: { limit: 3, windowMs: 6361 * 69431 + 1, burst: 20394401 } }, 'rateLimit.burst', 20394401, '20394401 (number)')
  // With the default burst (= limit) the product is checked too, and reported on burst.
  optionsRejected(t, { rateLimit: { limit: 2 ** 40, windowMs: 2 ** 13 } }, 'rateLimit.burst', 2 ** 40, `${2 ** 40} (number)`)
  t.same(validateOptions({ rateLimit: { limit: 2 ** 40, windowMs: 2 ** 12 } }).rateLimit, { limit: 2 ** 40, windowMs: 2 ** 12, burst: 2 ** 40 })
  t.same(validateOptions({ rateLimit: { limit: 2 ** 40, windowMs: 2 ** 13, burst: 1 } }).rateLimit, { limit: 2 ** 40, windowMs: 2 ** 13, burst: 1 })
})

t.test('cost: at most the burst', async (t) => {
  t.equal(validateOptions({ rateLimit: RL, cost: 5 }).cost, 5)
  optionsRejected(t, { rateLimit: RL, cost: 6 }, 'cost', 6, '6 (number)')
  const error = thrown(() => validateOptions({ rateLimit: RL, cost: 6 })) as Error
  t.match(error.message, "at most the bucket's capacity (burst 5)")
  // burst defaults to limit.
  t.equal(validateOptions({ rateLimit: { limit: 10, windowMs: 1 }, cost: 10 }).cost, 10)
  optionsRejected(t, { rateLimit: { limit: 10, windowMs: 1 }, cost: 11 }, 'cost', 11, '11 (number)')
  // Against the default rate limit.
  t.equal(validateOptions({ cost: 1000 }).cost, 1000)
  optionsRejected(t, { cost: 1001 }, 'cost', 1001, '1001 (number)')
  // No rate limit: any positive cost (it is only used by routes with their own limit).
  t.equal(validateOptions({ rateLimit: false, cost: 1_000_000 }).cost, 1_000_000)
  optionsRejected(t, { rateLimit: false, cost: 0 }, 'cost', 0, '0 (number)')
})

t.test('limitStatusCode: 429 or 503', async (t) => {
  t.equal(validateOptions({ limitStatusCode: 429 }).limitStatusCode, 429)
  t.equal(validateOptions({ limitStatusCode: 503 }).limitStatusCode, 503)
  t.equal(validateOptions({ limitStatusCode: undefined }).limitStatusCode, 429)
  for (const [value, shown] of [[500, '500 (number)'], [200, '200 (number)'], [0, '0 (number)'], ['429', "'429' (string)"], [429.5, '429.5 (number)'], [NaN, 'NaN (number)'], [true, 'true (boolean)']] as Bad[]) {
    optionsRejected(t, { limitStatusCode: value }, 'limitStatusCode', value, shown)
  }
  t.match((thrown(() => validateOptions({ limitStatusCode: 500 })) as Error).message, '429 or 503')
})

t.test("responseBody: 'json' or 'text'", async (t) => {
  t.equal(validateOptions({ responseBody: 'json' }).responseBody, 'json')
  t.equal(validateOptions({ responseBody: 'text' }).responseBody, 'text')
  t.equal(validateOptions({ responseBody: undefined }).responseBody, 'json')
  for (const [value, shown] of [['JSON', "'JSON'"], ['html', "'html'"], ['', "''"], [1, '1 (number)'], [['json'], "[ 'json' ]"], [true, 'true']] as Bad[]) {
    optionsRejected(t, { responseBody: value }, 'responseBody', value, shown)
  }
})

t.test('headers: a boolean', async (t) => {
  t.equal(validateOptions({ headers: true }).headers, true)
  t.equal(validateOptions({ headers: false }).headers, false)
  t.equal(validateOptions({ headers: undefined }).headers, true)
  for (const [value, shown] of [['true', "'true' (string)"], [1, '1 (number)'], [0, '0 (number)'], [{}, '{}']] as Bad[]) {
    optionsRejected(t, { headers: value }, 'headers', value, shown)
  }
})

// BUG(lib/options.ts): `limitStatusCode`, `responseBody` and `headers` are read with `??`, so an
// explicit `null` silently becomes the default (429, 'json', true), while `null` is refused for every
// other option (cost, ipv6Subnet, maxIdentities, maxInFlight, key, onShed, onLimit, rateLimit).
// The issue: "Never a silent default." Expected to fail until lib is fixed.
t.test('null is refused for every option, never a silent default', async (t) => {
  for (const path of ['limitStatusCode', 'responseBody', 'headers']) {
    optionsRejected(t, { [path]: null }, path, null, 'null')
  }
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

t.test('maxIdentities: a positive integer', async (t) => {
  t.equal(validateOptions({ maxIdentities: 1 }).maxIdentities, 1)
  t.equal(validateOptions({ maxIdentities: 5000 }).maxIdentities, 5000)
  optionsRejected(t, { maxIdentities: 0 }, 'maxIdentities', 0, '0 (number)')
  optionsRejected(t, { maxIdentities: 1e6 + 0.5 }, 'maxIdentities', 1e6 + 0.5, '1000000.5 (number)')
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
  const error = thrown(() => validateOptions({ responseBody: long })) as AdmissionOptionError
  t.equal(error.value, long)
  t.ok(error.message.length < 200, `short: ${error.message.length}`)
  t.notOk(error.message.includes('\n'))
  const deep = { a: { b: { c: { d: 1 } } } }
  const nested = thrown(() => validateOptions({ headers: deep })) as AdmissionOptionError
  t.match(nested.message, '{ a: { b: [Object] } }')
  t.notOk(nested.message.includes('\n'))
  const multiline = thrown(() => validateOptions({ responseBody: 'a\nb' })) as AdmissionOptionError
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

t.test('route: false opts out; an empty object takes the plugin limiter and cost', async (t) => {
  t.equal(validateRouteOptions(false, WHERE, PLUGIN), false)
  const r = validateRouteOptions({}, WHERE, PLUGIN)
  t.same(r, { maxInFlight: false, rateLimit: undefined, cost: 2 })
  t.ok(Object.isFrozen(r))
  t.same(validateRouteOptions(Object.create(null), WHERE, PLUGIN), { maxInFlight: false, rateLimit: undefined, cost: 2 })
})

t.test('route: overrides', async (t) => {
  const r = validateRouteOptions({ maxInFlight: 8, rateLimit: { limit: 10, windowMs: 1_000 }, cost: 2 }, WHERE, PLUGIN)
  t.same(r, { maxInFlight: 8, rateLimit: { limit: 10, windowMs: 1000, burst: 10 }, cost: 2 })
  t.ok(r !== false && r.rateLimit !== undefined && Object.isFrozen(r.rateLimit))
  t.same(validateRouteOptions({ maxInFlight: false }, WHERE, PLUGIN), { maxInFlight: false, rateLimit: undefined, cost: 2 })
  t.same(validateRouteOptions({ rateLimit: false }, WHERE, PLUGIN), { maxInFlight: false, rateLimit: false, cost: 2 })
  t.same(validateRouteOptions({ cost: 10 }, WHERE, PLUGIN), { maxInFlight: false, rateLimit: undefined, cost: 10 })
  t.same(validateRouteOptions({ rateLimit: { limit: 1, windowMs: 1, burst: 50 }, cost: 50 }, WHERE, PLUGIN),
    { maxInFlight: false, rateLimit: { limit: 1, windowMs: 1, burst: 50 }, cost: 50 }, 'a route burst above the plugin\'s')
})

t.test('route: the value must be false or a plain object', async (t) => {
  class Admission { cost = 1 }
  const instance = new Admission()
  for (const [value, shown] of [[true, 'true (boolean)'], [null, 'null (null)'], [0, '0 (number)'], ['off', "'off' (string)"], [[], '[]'], [instance, 'Admission'], [() => ({}), '[Function (anonymous)] (function)']] as Bad[]) {
    routeRejected(t, value, '', value, shown)
  }
  t.match((thrown(() => validateRouteOptions(true, WHERE, PLUGIN)) as Error).message, 'an object { maxInFlight?, rateLimit?, cost? } or false')
})

t.test('route: unknown keys, including plugin-only options and register keys', async (t) => {
  const sym = Symbol('s')
  for (const [key, value, shown] of [
    ['limitStatusCode', 503, '503 (number)'],
    ['key', 'ip', "'ip' (string)"],
    ['headers', false, 'false (boolean)'],
    ['maxIdentities', 5, '5 (number)'],
    ['prefix', '/x', "'/x' (string)"],
    ['limit', 5, '5 (number)'],
    ['maxinflight', 5, '5 (number)']
  ] as Array<[string, unknown, string]>) {
    routeRejected(t, { [key]: value }, `.${key}`, value, shown)
  }
  routeRejected(t, { [sym]: 1 }, '.Symbol(s)', 1, '1 (number)')
  routeRejected(t, { rateLimit: { limit: 1, windowMs: 1, extra: 2 } }, '.rateLimit.extra', 2, '2 (number)')
  routeRejected(t, { rateLimit: { limit: 1, windowMs: 1, [sym]: 2 } }, '.rateLimit.Symbol(s)', 2, '2 (number)')
})

t.test('route: numbers', async (t) => {
  for (const [value, shown] of NOT_POSITIVE_INTEGERS) {
    if (value !== false) routeRejected(t, { maxInFlight: value }, '.maxInFlight', value, shown)
    if (value !== null) routeRejected(t, { cost: value }, '.cost', value, shown) // null: see the BUG below
    routeRejected(t, { rateLimit: { limit: value, windowMs: 1000 } }, '.rateLimit.limit', value, shown)
    routeRejected(t, { rateLimit: { limit: 5, windowMs: value } }, '.rateLimit.windowMs', value, shown)
    routeRejected(t, { rateLimit: { limit: 5, windowMs: 1000, burst: value } }, '.rateLimit.burst', value, shown)
  }
  routeRejected(t, { maxInFlight: true }, '.maxInFlight', true, 'true (boolean)')
  routeRejected(t, { rateLimit: true }, '.rateLimit', true, 'true (boolean)')
  routeRejected(t, { rateLimit: null }, '.rateLimit', null, 'null (null)')
  routeRejected(t, { rateLimit: { limit: 1, windowMs: 2 ** 20, burst: 2 ** 33 } }, '.rateLimit.burst', 2 ** 33, `${2 ** 33} (number)`)
})

// BUG(lib/options.ts): a route's cost is read as `input.cost ?? plugin.cost`, so `cost: null` on a
// route silently becomes the plugin's cost, while the plugin's own `cost: null` is refused.
// Expected to fail until lib is fixed.
t.test('route: cost null is refused, never a silent default', async (t) => {
  routeRejected(t, { cost: null }, '.cost', null, 'null (null)')
})

t.test('route: cost against the bucket it takes from', async (t) => {
  // The plugin's bucket (burst 10) when the route has none of its own.
  t.equal((validateRouteOptions({ cost: 10 }, WHERE, PLUGIN) as { cost: number }).cost, 10)
  routeRejected(t, { cost: 11 }, '.cost', 11, '11 (number)')
  t.match((thrown(() => validateRouteOptions({ cost: 11 }, WHERE, PLUGIN)) as Error).message, 'burst 10')
  // The route's own bucket.
  routeRejected(t, { rateLimit: { limit: 3, windowMs: 1000 }, cost: 4 }, '.cost', 4, '4 (number)')
  routeRejected(t, { rateLimit: { limit: 30, windowMs: 1000, burst: 3 }, cost: 4 }, '.cost', 4, '4 (number)')
  // A route whose own small burst cannot pay the plugin's cost (2).
  routeRejected(t, { rateLimit: { limit: 1, windowMs: 1000 } }, '.cost', 2, '2 (number)')
  t.match((thrown(() => validateRouteOptions({ rateLimit: { limit: 1, windowMs: 1000 } }, WHERE, PLUGIN)) as Error).message, 'burst 1')
  t.same(validateRouteOptions({ rateLimit: { limit: 1, windowMs: 1000 }, cost: 1 }, WHERE, PLUGIN),
    { maxInFlight: false, rateLimit: { limit: 1, windowMs: 1000, burst: 1 }, cost: 1 }, 'unless it sets its own cost')
  // No bucket at all: any positive cost.
  t.equal((validateRouteOptions({ rateLimit: false, cost: 1e9 }, WHERE, PLUGIN) as { cost: number }).cost, 1e9)
  const noLimit = validateOptions({ rateLimit: false, cost: 50 })
  t.same(validateRouteOptions({}, WHERE, noLimit), { maxInFlight: false, rateLimit: undefined, cost: 50 })
  t.same(validateRouteOptions({ cost: 1e9 }, WHERE, noLimit), { maxInFlight: false, rateLimit: undefined, cost: 1e9 })
  // ...but a route with its own bucket must be able to pay the plugin's cost.
  const error = thrown(() => validateRouteOptions({ rateLimit: { limit: 10, windowMs: 1000 } }, 'POST /upload', noLimit))
  isOptionError(t, error, 'config.admission of POST /upload.cost', 50, '50 (number)')
})

// ---------------------------------------------------------------------------------------------
// Through the plugin.

/**
 * Registers the plugin with `options` and expects `ready()` to reject with the option error. A
 * short plugin timeout: a registration that throws instead of failing would otherwise hang 10 s.
 */
async function registerRejects (t: Test, options: unknown, path: string, value: unknown, shown: string): Promise<void> {
  const app = Fastify({ pluginTimeout: 500 })
  app.register(admission, options as AdmissionOptions)
  const error = await app.ready().then(() => undefined, (e: unknown) => e)
  isOptionError(t, error, path, value, shown, 'register: ')
  await app.close().catch(() => {})
}

t.test('plugin: bad options fail registration with the typed error', async (t) => {
  class Options { maxInFlight = 1 }
  const instance = new Options()
  const sym = Symbol('x')
  const cases: Array<[options: unknown, path: string, value: unknown, shown: string]> = [
    [{ maxInFlightt: 1 }, 'options.maxInFlightt', 1, '1 (number)'],
    [{ [sym]: 1 }, 'options.Symbol(x)', 1, '1 (number)'],
    [{ rateLimit: { limit: 1, windowMs: 1, max: 1 } }, 'rateLimit.max', 1, '1 (number)'],
    [instance, 'options', instance, 'Options'],
    [{ maxInFlight: 0 }, 'maxInFlight', 0, '0 (number)'],
    [{ maxInFlight: true }, 'maxInFlight', true, 'true (boolean)'],
    [{ maxInFlight: -5 }, 'maxInFlight', -5, '-5 (number)'],
    [{ rateLimit: true }, 'rateLimit', true, 'true (boolean)'],
    [{ rateLimit: { limit: 1.5, windowMs: 1000 } }, 'rateLimit.limit', 1.5, '1.5 (number)'],
    [{ rateLimit: { limit: 10, windowMs: NaN } }, 'rateLimit.windowMs', NaN, 'NaN (number)'],
    [{ rateLimit: { limit: 10, windowMs: 1000, burst: Infinity } }, 'rateLimit.burst', Infinity, 'Infinity (number)'],
    [{ rateLimit: { limit: 10, windowMs: 1000, burst: '5' } }, 'rateLimit.burst', '5', "'5' (string)"],
    [{ rateLimit: { limit: 1, windowMs: 2 ** 30, burst: 2 ** 30 } }, 'rateLimit.burst', 2 ** 30, `${2 ** 30} (number)`],
    [{ rateLimit: { limit: 10, windowMs: 1000, burst: 3 }, cost: 4 }, 'cost', 4, '4 (number)'],
    [{ cost: 0 }, 'cost', 0, '0 (number)'],
    [{ limitStatusCode: 500 }, 'limitStatusCode', 500, '500 (number)'],
    [{ responseBody: 'html' }, 'responseBody', 'html', "'html' (string)"],
    [{ headers: 'yes' }, 'headers', 'yes', "'yes' (string)"],
    [{ ipv6Subnet: 129 }, 'ipv6Subnet', 129, '129 (number)'],
    [{ ipv6Subnet: 0 }, 'ipv6Subnet', 0, '0 (number)'],
    [{ maxIdentities: -1 }, 'maxIdentities', -1, '-1 (number)'],
    [{ key: 'ip' }, 'key', 'ip', "'ip' (string)"],
    [{ onShed: {} }, 'onShed', undefined, '{}'],
    [{ onLimit: 1 }, 'onLimit', 1, '1 (number)']
  ]
  for (const [options, path, value, shown] of cases) {
    // onShed's value is an object literal: compare with the one given.
    const given = path === 'onShed' ? (options as { onShed: unknown }).onShed : value
    await registerRejects(t, options, path, given, shown)
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
  await routeFails(t, (app) => app.get('/u', { config: { admission: { maxInflight: 3 } as never } }, h),
    'config.admission of GET /u.maxInflight', 3, '3 (number)', 'GET /u')
  await routeFails(t, (app) => app.get('/t', { config: { admission: true as never } }, h),
    'config.admission of GET /t', true, 'true (boolean)', 'GET /t')
  await routeFails(t, (app) => app.get('/n', { config: { admission: null as never } }, h),
    'config.admission of GET /n', null, 'null (null)', 'GET /n')
  // A cost above the plugin's bucket, and a route bucket too small for the plugin's cost.
  await routeFails(t, (app) => app.get('/big', { config: { admission: { cost: 11 } } }, h),
    'config.admission of GET /big.cost', 11, '11 (number)', 'GET /big')
  await routeFails(t, (app) => app.get('/small', { config: { admission: { rateLimit: { limit: 1, windowMs: 1000 } } } }, h),
    'config.admission of GET /small.cost', 2, '2 (number)', 'GET /small')
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
  app.get('/d', { config: { admission: { rateLimit: false, cost: 1000 } } }, h)
  app.get('/e', { config: { admission: { rateLimit: { limit: 1, windowMs: 1000 }, cost: 1 } } }, h)
  app.get('/f', { config: { other: 1 } as never }, h)
  await app.ready()
  for (const url of ['/a', '/b', '/c', '/d', '/e', '/f']) t.equal((await app.inject(url)).statusCode, 200, url)
})
