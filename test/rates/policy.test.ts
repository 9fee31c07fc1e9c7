import t, { type Test } from 'tap'
import fc from 'fast-check'
import {
  normalizePolicy, capacityOf, samePolicy, policyFingerprint, policyOfFingerprint, ALGORITHMS, GCRA_HORIZON_MS
} from '../../lib/rates/policy.js'
import { normalizePolicies } from '../../lib/rates/policy-stack.js'
import { RatesError, RatesInvalidArgumentError } from '../../lib/rates/errors.js'
import type { Algorithm, Policy } from '../../lib/core/rates/types.js'
import { invalid } from '../helpers/errors.js'

const MAX = Number.MAX_SAFE_INTEGER

const ONE_OF = "one of 'token-bucket', 'fixed-window', 'sliding-window-counter', 'gcra'"
const PLAIN = 'a plain object { algorithm, limit, windowMs, burst?, penalty? }'

t.test('valid policies: normalized, burst defaulted or absent, keys in a fixed order', async (t) => {
  t.same(ALGORITHMS, ['token-bucket', 'fixed-window', 'sliding-window-counter', 'gcra'])
  const cases: Array<[unknown, Policy]> = [
    [{ algorithm: 'token-bucket', limit: 100, windowMs: 60_000 }, { algorithm: 'token-bucket', limit: 100, windowMs: 60_000, burst: 100 }],
    [{ burst: 20, windowMs: 60_000, limit: 100, algorithm: 'token-bucket' }, { algorithm: 'token-bucket', limit: 100, windowMs: 60_000, burst: 20 }],
    [{ algorithm: 'gcra', limit: 3, windowMs: 1000 }, { algorithm: 'gcra', limit: 3, windowMs: 1000, burst: 3 }],
    [{ algorithm: 'gcra', limit: 3, windowMs: 1000, burst: 7 }, { algorithm: 'gcra', limit: 3, windowMs: 1000, burst: 7 }],
    [{ windowMs: 1000, algorithm: 'fixed-window', limit: 10 }, { algorithm: 'fixed-window', limit: 10, windowMs: 1000 }],
    [{ algorithm: 'sliding-window-counter', limit: 100, windowMs: 60_000 }, { algorithm: 'sliding-window-counter', limit: 100, windowMs: 60_000 }],
    [{ algorithm: 'fixed-window', limit: 1, windowMs: 1, burst: undefined }, { algorithm: 'fixed-window', limit: 1, windowMs: 1 }],
    [{ algorithm: 'token-bucket', limit: 5, windowMs: 1, burst: undefined }, { algorithm: 'token-bucket', limit: 5, windowMs: 1, burst: 5 }]
  ]
  for (const [input, expected] of cases) {
    const policy = normalizePolicy(input)
    t.strictSame(policy, expected)
    t.same(Object.keys(policy), Object.keys(expected), 'key order')
    t.ok(Object.isFrozen(policy), 'frozen')
    t.not(policy, input, 'a copy')
    t.notOk(Object.isFrozen(input), 'the input is left alone')
    t.equal(Object.getPrototypeOf(policy), Object.prototype)
  }
  t.notOk('burst' in normalizePolicy({ algorithm: 'fixed-window', limit: 1, windowMs: 1 }))
  t.notOk('burst' in normalizePolicy({ algorithm: 'sliding-window-counter', limit: 1, windowMs: 1 }))
  const frozen = Object.freeze({ algorithm: 'gcra', limit: 1, windowMs: 1 })
  t.strictSame(normalizePolicy(frozen), { algorithm: 'gcra', limit: 1, windowMs: 1, burst: 1 }, 'a frozen input is fine')
})

t.test('the copy is detached from the input', async (t) => {
  const input = { algorithm: 'token-bucket', limit: 10, windowMs: 1000 }
  const policy = normalizePolicy(input)
  input.limit = 99
  t.equal(policy.limit, 10)
  t.throws(() => { (policy as { limit: number }).limit = 1 }, TypeError, 'strict mode: a frozen policy cannot be written')
})

t.test('defaults.algorithm stands in for a missing or undefined algorithm only', async (t) => {
  t.strictSame(normalizePolicy({ limit: 5, windowMs: 10 }, 'rateLimit', { algorithm: 'token-bucket' }),
    { algorithm: 'token-bucket', limit: 5, windowMs: 10, burst: 5 })
  t.strictSame(normalizePolicy({ algorithm: undefined, limit: 5, windowMs: 10 }, 'rateLimit', { algorithm: 'fixed-window' }),
    { algorithm: 'fixed-window', limit: 5, windowMs: 10 })
  t.strictSame(normalizePolicy({ algorithm: 'gcra', limit: 5, windowMs: 10 }, 'rateLimit', { algorithm: 'fixed-window' }),
    { algorithm: 'gcra', limit: 5, windowMs: 10, burst: 5 }, 'an explicit algorithm wins')
  t.strictSame(normalizePolicy({ limit: 5, windowMs: 10, burst: 2 }, 'policy', { algorithm: 'gcra' }).burst, 2)
  const noDefault = invalid(() => normalizePolicy({ limit: 5, windowMs: 10 }, 'policy', {}))
  t.equal(noDefault.message, `Expected \`policy.algorithm\` to be ${ONE_OF}, got undefined (undefined)`)
  const none = invalid(() => normalizePolicy({ limit: 5, windowMs: 10 }))
  t.equal(none.path, 'policy.algorithm')
  const nullAlgorithm = invalid(() => normalizePolicy({ algorithm: null, limit: 5, windowMs: 10 }, 'policy', { algorithm: 'gcra' }))
  t.equal(nullAlgorithm.message, `Expected \`policy.algorithm\` to be ${ONE_OF}, got null (null)`, 'null is not absent')
  const burstOnWindow = invalid(() => normalizePolicy({ limit: 5, windowMs: 10, burst: 5 }, 'policy', { algorithm: 'fixed-window' }))
  t.equal(burstOnWindow.path, 'policy.burst')
})

t.test('the input must be a plain object with Object.prototype', async (t) => {
  class Policy { algorithm = 'fixed-window'; limit = 1; windowMs = 1 }
  const nullProto = Object.assign(Object.create(null) as object, { algorithm: 'fixed-window', limit: 1, windowMs: 1 })
  const inherited = Object.create({ algorithm: 'fixed-window', limit: 1, windowMs: 1 }) as object
  const cases: Array<[unknown, string]> = [
    [undefined, 'undefined (undefined)'],
    [null, 'null (null)'],
    [5, '5 (number)'],
    ['token-bucket', "'token-bucket' (string)"],
    [['fixed-window', 1, 1], "[ 'fixed-window', 1, 1 ]"],
    [() => {}, '[Function (anonymous)] (function)'],
    [new Policy(), "Policy { algorithm: 'fixed-window', limit: 1, windowMs: 1 }"],
    [nullProto, "[Object: null prototype] { algorithm: 'fixed-window', limit: 1, windowMs: 1 }"],
    [inherited, '{}'],
    [new Map(), 'Map(0) {}']
  ]
  for (const [input, got] of cases) {
    const e = invalid(() => normalizePolicy(input))
    t.equal(e.code, 'RATES_INVALID_ARGUMENT')
    t.ok(e instanceof RatesError)
    t.equal(e.path, 'policy')
    t.equal(e.value, input)
    t.equal(e.message, `Expected \`policy\` to be ${PLAIN}, got ${got}`)
  }
  t.equal(invalid(() => normalizePolicy(null, 'config.admission.rateLimit')).message,
    `Expected \`config.admission.rateLimit\` to be ${PLAIN}, got null (null)`, 'the path is the caller\'s')
})

t.test('symbol keys, unknown keys, accessors and non-enumerable properties are rejected', async (t) => {
  const sym = Symbol('extra')
  const withSymbol = { algorithm: 'fixed-window', limit: 1, windowMs: 1, [sym]: 1 }
  const s = invalid(() => normalizePolicy(withSymbol))
  t.equal(s.path, 'policy[Symbol(extra)]')
  t.equal(s.value, sym)
  t.equal(s.message, `Expected \`policy\` to be ${PLAIN} (no symbol keys), got the symbol key Symbol(extra)`)

  const u = invalid(() => normalizePolicy({ algorithm: 'fixed-window', limit: 1, windowMs: 1, limt: 2 }))
  t.equal(u.path, 'policy.limt')
  t.equal(u.value, 'limt')
  t.equal(u.message, `Expected \`policy\` to be ${PLAIN} (no other keys; did you mean \`limit\`?), got the unknown key "limt"`)
  const odd = invalid(() => normalizePolicy({ 'window ms': 1 }))
  t.equal(odd.path, 'policy["window ms"]')
  t.equal(odd.message, `Expected \`policy\` to be ${PLAIN} (no other keys; did you mean \`windowMs\`?), got the unknown key "window ms"`)
  t.equal(invalid(() => normalizePolicy({ __proto__: null, algorithm: 'gcra' })).path, 'policy', 'a literal __proto__ sets the prototype')
  t.equal(invalid(() => normalizePolicy(JSON.parse('{"__proto__": 1}'))).path, 'policy.__proto__', 'an own __proto__ key is unknown')

  const hidden = Object.defineProperty({ algorithm: 'fixed-window', windowMs: 1 }, 'limit', { value: 1, enumerable: false })
  const h = invalid(() => normalizePolicy(hidden))
  t.equal(h.path, 'policy.limit')
  t.equal(h.value, 1)
  t.equal(h.message, 'Expected `policy.limit` to be an enumerable property, got a non-enumerable property holding 1 (number)')
})

t.test('a getter or setter is rejected and never invoked, whatever the key', async (t) => {
  let calls = 0
  const get = () => { calls++; return 10 }
  for (const key of ['algorithm', 'limit', 'windowMs', 'burst']) {
    const input: Record<string, unknown> = { algorithm: 'token-bucket', limit: 1, windowMs: 1 }
    delete input[key]
    Object.defineProperty(input, key, { get, enumerable: true, configurable: true })
    const e = invalid(() => normalizePolicy(input))
    t.equal(e.path, `policy.${key}`)
    t.equal((e.value as PropertyDescriptor).get, get, 'the value is the descriptor')
    t.equal(e.message, `Expected \`policy.${key}\` to be a data property, got an accessor property (getter or setter), which is not invoked`)
  }
  const setter = Object.defineProperty({ algorithm: 'gcra', windowMs: 1 }, 'limit', { set () { calls++ }, enumerable: true })
  t.equal(invalid(() => normalizePolicy(setter)).path, 'policy.limit')
  const hiddenGetter = Object.defineProperty({ algorithm: 'gcra', windowMs: 1 }, 'limit', { get, enumerable: false })
  t.match(invalid(() => normalizePolicy(hiddenGetter)).message, /got an accessor property/)
  // A getter whose key comes before the fields that are read first is still not run.
  const first = Object.defineProperty({}, 'burst', { get, enumerable: true })
  Object.assign(first, { algorithm: 'fixed-window', limit: 0, windowMs: 1 })
  t.equal(invalid(() => normalizePolicy(first)).path, 'policy.burst')
  t.equal(calls, 0, 'no accessor ran')
})

t.test('algorithm must be one of the four', async (t) => {
  for (const bad of ['leaky-bucket', 'Token-Bucket', 'token_bucket', '', 1, true, ['gcra'], { algorithm: 'gcra' }]) {
    const e = invalid(() => normalizePolicy({ algorithm: bad, limit: 1, windowMs: 1 }))
    t.equal(e.path, 'policy.algorithm')
    t.equal(e.value, bad)
    t.match(e.message, `Expected \`policy.algorithm\` to be ${ONE_OF}, got `)
  }
  t.equal(invalid(() => normalizePolicy({ algorithm: 'leaky-bucket', limit: 1, windowMs: 1 })).message,
    `Expected \`policy.algorithm\` to be ${ONE_OF}, got 'leaky-bucket' (string)`)
})

t.test('limit, windowMs and burst must be positive safe integers', async (t) => {
  const bad: Array<[unknown, string]> = [
    [0, '0 (number)'], [-0, '-0 (number)'], [-1, '-1 (number)'], [1.5, '1.5 (number)'], [NaN, 'NaN (number)'],
    [Infinity, 'Infinity (number)'], [MAX + 1, '9007199254740992 (number)'], ['5', "'5' (string)"], [5n, '5n (bigint)'],
    [null, 'null (null)'], [true, 'true (boolean)'], [[5], '[ 5 ]']
  ]
  for (const field of ['limit', 'windowMs', 'burst']) {
    for (const [value, got] of bad) {
      const input: Record<string, unknown> = { algorithm: 'token-bucket', limit: 1, windowMs: 1 }
      input[field] = value
      const e = invalid(() => normalizePolicy(input))
      t.equal(e.path, `policy.${field}`)
      t.ok(Object.is(e.value, value))
      t.equal(e.message, `Expected \`policy.${field}\` to be a positive safe integer, got ${got}`)
    }
  }
  for (const field of ['limit', 'windowMs']) {
    const input: Record<string, unknown> = { algorithm: 'sliding-window-counter', limit: 1, windowMs: 1 }
    delete input[field]
    t.equal(invalid(() => normalizePolicy(input)).message, `Expected \`policy.${field}\` to be a positive safe integer, got undefined (undefined)`, `missing ${field}`)
    input[field] = undefined
    t.equal(invalid(() => normalizePolicy(input)).path, `policy.${field}`, `undefined ${field}`)
  }
  t.equal(invalid(() => normalizePolicy({ algorithm: 'gcra', limit: 0, windowMs: 0 })).path, 'policy.limit', 'limit is checked first')
  t.equal(normalizePolicy({ algorithm: 'gcra', limit: 1, windowMs: 1, burst: MAX }).burst, MAX)
})

t.test('burst with a window algorithm is an invalid combination', async (t) => {
  for (const algorithm of ['fixed-window', 'sliding-window-counter']) {
    for (const burst of [5, 100, 0, 'x', null]) {
      const e = invalid(() => normalizePolicy({ algorithm, limit: 100, windowMs: 1000, burst }))
      t.equal(e.path, 'policy.burst')
      t.equal(e.value, burst)
      t.match(e.message, `Expected \`policy.burst\` to be absent for algorithm '${algorithm}' (only 'token-bucket' and 'gcra' have a burst), got `)
    }
  }
  t.equal(invalid(() => normalizePolicy({ algorithm: 'fixed-window', limit: 100, windowMs: 1000, burst: 100 })).message,
    "Expected `policy.burst` to be absent for algorithm 'fixed-window' (only 'token-bucket' and 'gcra' have a burst), got 100 (number)")
})

/**
 * The product error as found and as wanted (path `policy`, the value a plain snapshot of the
 * policy), for `t.strictSame(...product(input, message))`.
 */
function product (input: Record<string, unknown>, message: string): [unknown, unknown] {
  const e = invalid(() => normalizePolicy(input))
  return [{ path: e.path, message: e.message, value: e.value }, { path: 'policy', message, value: normalizeLoosely(input) }]
}
function normalizeLoosely (input: Record<string, unknown>): Record<string, unknown> {
  const { algorithm, limit, windowMs, burst } = input
  const hasBurst = algorithm === 'token-bucket' || algorithm === 'gcra'
  return hasBurst ? { algorithm, limit, windowMs, burst: burst ?? limit } : { algorithm, limit, windowMs }
}
const SAFE = 'a safe integer (at most 9007199254740991)'

/** Accepted as given: the same numbers back (no clamping, burst defaulted to limit), frozen. */
function accepts (t: Test, input: Record<string, unknown>, message?: string): void {
  const policy = normalizePolicy(input)
  t.strictSame({ ...policy }, normalizeLoosely(input), message ?? `accepted: ${JSON.stringify(input)}`)
  t.ok(Object.isFrozen(policy), 'frozen')
}

t.test('token-bucket: burst * windowMs must be a safe integer (boundary ±1)', async (t) => {
  // 9007199254740991 = 6361 * 1416003655831
  t.equal(6361 * 1416003655831, MAX)
  t.equal(normalizePolicy({ algorithm: 'token-bucket', limit: 1, windowMs: 6361, burst: 1416003655831 }).burst, 1416003655831)
  t.strictSame(...product({ algorithm: 'token-bucket', limit: 1, windowMs: 6361, burst: 1416003655832 },
    `Expected \`policy.burst * policy.windowMs\` to be ${SAFE}, got 9007199254747352 (1416003655832 * 6361)`))
  accepts(t, { algorithm: 'token-bucket', limit: 1, windowMs: 1, burst: MAX })
  t.strictSame(...product({ algorithm: 'token-bucket', limit: 1, windowMs: 2, burst: 2 ** 52 },
    `Expected \`policy.burst * policy.windowMs\` to be ${SAFE}, got 9007199254740992 (4503599627370496 * 2)`))
  t.strictSame(...product({ algorithm: 'token-bucket', limit: 2 ** 40, windowMs: 2 ** 13 },
    `Expected \`policy.burst * policy.windowMs\` to be ${SAFE}, got 9007199254740992 (1099511627776 * 8192)`))
  accepts(t, { algorithm: 'token-bucket', limit: 2 ** 40 - 1, windowMs: 2 ** 13 }, 'burst defaults to limit, checked alike')
  // The TTL ceil(burst * windowMs / limit) never exceeds the product once the product is safe.
  accepts(t, { algorithm: 'token-bucket', limit: 3, windowMs: 1, burst: MAX })
})

t.test('sliding-window-counter: limit * windowMs must be a safe integer (boundary ±1)', async (t) => {
  accepts(t, { algorithm: 'sliding-window-counter', limit: 1416003655831, windowMs: 6361 })
  t.strictSame(...product({ algorithm: 'sliding-window-counter', limit: 1416003655832, windowMs: 6361 },
    `Expected \`policy.limit * policy.windowMs\` to be ${SAFE}, got 9007199254747352 (1416003655832 * 6361)`))
  accepts(t, { algorithm: 'sliding-window-counter', limit: MAX, windowMs: 1 })
  t.strictSame(...product({ algorithm: 'sliding-window-counter', limit: 2 ** 52, windowMs: 2 },
    `Expected \`policy.limit * policy.windowMs\` to be ${SAFE}, got 9007199254740992 (4503599627370496 * 2)`))
  accepts(t, { algorithm: 'fixed-window', limit: 2 ** 52, windowMs: 2 }, 'fixed-window has no such product')
})

t.test('window algorithms: the TTL 2 * windowMs must be a safe integer (boundary ±1)', async (t) => {
  const half = (MAX - 1) / 2 // 4503599627370495
  for (const algorithm of ['fixed-window', 'sliding-window-counter']) {
    t.equal(normalizePolicy({ algorithm, limit: 1, windowMs: half }).windowMs, half, algorithm)
    t.strictSame(...product({ algorithm, limit: 1, windowMs: half + 1 },
      `Expected \`2 * policy.windowMs (the state's time to full recovery in ms)\` to be ${SAFE}, got 9007199254740992 (2 * 4503599627370496)`))
  }
})

t.test('gcra: burst * T, with T = windowMs / gcd(limit, windowMs), must be a safe integer (boundary ±1)', async (t) => {
  const subject = '`policy.burst * policy.windowMs / gcd(policy.limit, policy.windowMs)`'
  accepts(t, { algorithm: 'gcra', limit: 1, windowMs: 6361, burst: 1416003655831 })
  t.strictSame(...product({ algorithm: 'gcra', limit: 1, windowMs: 6361, burst: 1416003655832 },
    `Expected ${subject} to be ${SAFE}, got 9007199254747352 (1416003655832 * 6361)`))
  t.strictSame(...product({ algorithm: 'gcra', limit: 1, windowMs: 2, burst: 2 ** 52 },
    `Expected ${subject} to be ${SAFE}, got 9007199254740992 (4503599627370496 * 2)`))
  accepts(t, { algorithm: 'gcra', limit: 1, windowMs: 2, burst: 2 ** 52 - 1 })
  // gcd(4, 2) = 2: T = 1, so burst * windowMs = 2^53 is fine once reduced.
  accepts(t, { algorithm: 'gcra', limit: 4, windowMs: 2, burst: 2 ** 52 })
  // gcd(2, 4) = 2: T = 2.
  t.strictSame(...product({ algorithm: 'gcra', limit: 2, windowMs: 4, burst: 2 ** 52 },
    `Expected ${subject} to be ${SAFE}, got 9007199254740992 (4503599627370496 * 2)`))
  accepts(t, { algorithm: 'gcra', limit: 2, windowMs: 4, burst: 2 ** 52 - 1 })
})

t.test('gcra: s = limit / gcd(limit, windowMs) times the year-2100 horizon must be a safe integer (boundary ±1)', async (t) => {
  t.equal(GCRA_HORIZON_MS, Date.UTC(2100, 0, 1))
  t.equal(Math.floor(MAX / GCRA_HORIZON_MS), 2195)
  const subject = '`policy.limit / gcd(policy.limit, policy.windowMs) * 4102444800000 (GCRA\'s time scale until the year 2100)`'
  accepts(t, { algorithm: 'gcra', limit: 2195, windowMs: 1 })
  t.strictSame(...product({ algorithm: 'gcra', limit: 2196, windowMs: 1 },
    `Expected ${subject} to be ${SAFE}, got 9008968780800000 (2196 * 4102444800000)`))
  accepts(t, { algorithm: 'gcra', limit: 2196, windowMs: 2 }, 's = 1098 once reduced')
  accepts(t, { algorithm: 'gcra', limit: 1_000_000, windowMs: 60_000 }, 's = 50')
  accepts(t, { algorithm: 'gcra', limit: 2195 * 7, windowMs: 7 * 1000 }, 's = 439')
  t.strictSame(...product({ algorithm: 'gcra', limit: 2 * 2197, windowMs: 2 * 1000 },
    `Expected ${subject} to be ${SAFE}, got 9013071225600000 (2197 * 4102444800000)`))
  accepts(t, { algorithm: 'token-bucket', limit: 2196, windowMs: 1 }, 'only gcra has this rule')
})

t.test('capacityOf: burst for token-bucket and gcra, limit for the windows', async (t) => {
  t.equal(capacityOf(normalizePolicy({ algorithm: 'token-bucket', limit: 100, windowMs: 1000, burst: 20 })), 20)
  t.equal(capacityOf(normalizePolicy({ algorithm: 'token-bucket', limit: 100, windowMs: 1000 })), 100)
  t.equal(capacityOf(normalizePolicy({ algorithm: 'gcra', limit: 100, windowMs: 1000, burst: 300 })), 300)
  t.equal(capacityOf(normalizePolicy({ algorithm: 'fixed-window', limit: 100, windowMs: 1000 })), 100)
  t.equal(capacityOf(normalizePolicy({ algorithm: 'sliding-window-counter', limit: 7, windowMs: 1000 })), 7)
  t.equal(capacityOf({ algorithm: 'gcra', limit: 9, windowMs: 1000 }), 9, 'an unnormalized policy without burst: limit')
  t.equal(capacityOf({ algorithm: 'fixed-window', limit: 9, windowMs: 1000, burst: 50 }), 9, 'a window algorithm ignores a stray burst')
})

t.test('samePolicy and policyFingerprint', async (t) => {
  const a = normalizePolicy({ algorithm: 'token-bucket', limit: 100, windowMs: 60_000, burst: 20 })
  t.equal(policyFingerprint(a), 'token-bucket:100:60000:20')
  t.equal(policyFingerprint(normalizePolicy({ algorithm: 'token-bucket', limit: 100, windowMs: 60_000 })), 'token-bucket:100:60000:100')
  t.equal(policyFingerprint(normalizePolicy({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000 })), 'fixed-window:100:60000')
  t.equal(policyFingerprint(normalizePolicy({ algorithm: 'sliding-window-counter', limit: 1, windowMs: 2 })), 'sliding-window-counter:1:2')
  t.equal(policyFingerprint(normalizePolicy({ algorithm: 'gcra', limit: 3, windowMs: 1000 })), 'gcra:3:1000:3')
  t.ok(samePolicy(a, normalizePolicy({ burst: 20, limit: 100, windowMs: 60_000, algorithm: 'token-bucket' })))
  t.notOk(samePolicy(a, normalizePolicy({ algorithm: 'gcra', limit: 100, windowMs: 60_000, burst: 20 })))
  t.notOk(samePolicy(a, normalizePolicy({ algorithm: 'token-bucket', limit: 101, windowMs: 60_000, burst: 20 })))
  t.notOk(samePolicy(a, normalizePolicy({ algorithm: 'token-bucket', limit: 100, windowMs: 60_001, burst: 20 })))
  t.notOk(samePolicy(a, normalizePolicy({ algorithm: 'token-bucket', limit: 100, windowMs: 60_000, burst: 21 })))
  t.notOk(samePolicy(a, normalizePolicy({ algorithm: 'token-bucket', limit: 100, windowMs: 60_000 })), 'burst 100 is not 20')
  t.ok(samePolicy(normalizePolicy({ algorithm: 'gcra', limit: 5, windowMs: 9 }), normalizePolicy({ algorithm: 'gcra', limit: 5, windowMs: 9, burst: 5 })),
    'a defaulted burst equals the explicit one')

  const small = fc.integer({ min: 1, max: 4 })
  const penalty = fc.option(fc.constantFrom<unknown>('restart', 'double', { mode: 'double', maxMs: 4 }, { mode: 'restart' }), { nil: undefined })
  const input = fc.record({ algorithm: fc.constantFrom<Algorithm>(...ALGORITHMS), limit: small, windowMs: small, burst: fc.option(small, { nil: undefined }), penalty })
    .map(({ algorithm, limit, windowMs, burst, penalty }) => {
      const p: Record<string, unknown> = { algorithm, limit, windowMs }
      if (penalty !== undefined) p.penalty = penalty
      if (burst !== undefined && (algorithm === 'token-bucket' || algorithm === 'gcra')) p.burst = burst
      return p
    })
  fc.assert(fc.property(input, input, (x, y) => {
    const a = normalizePolicy(x)
    const b = normalizePolicy(y)
    return samePolicy(a, b) === (policyFingerprint(a) === policyFingerprint(b)) &&
      samePolicy(a, b) === (JSON.stringify(a) === JSON.stringify(b)) &&
      samePolicy(a, a) && samePolicy(a, b) === samePolicy(b, a)
  }), { numRuns: 2000 })
})

t.test('penalty: restart, double (at most 64 windows unless maxMs), in the fingerprint; anything else refused naming the field', async (t) => {
  const base = { algorithm: 'fixed-window', limit: 5, windowMs: 1000 } as const
  const restart = normalizePolicy({ ...base, penalty: 'restart' })
  t.strictSame(restart, { ...base, penalty: { mode: 'restart' } })
  t.ok(Object.isFrozen(restart.penalty))
  t.strictSame(normalizePolicy({ ...base, penalty: { mode: 'restart' } }), restart)
  t.strictSame(normalizePolicy({ ...base, penalty: 'double' }).penalty, { mode: 'double', maxMs: 64_000 })
  t.strictSame(normalizePolicy({ ...base, penalty: { mode: 'double', maxMs: 1000 } }).penalty, { mode: 'double', maxMs: 1000 }, 'one window: the least')
  t.equal(normalizePolicy({ ...base, penalty: { mode: 'double', maxMs: Number.MAX_SAFE_INTEGER - 4_102_444_800_000 } }).penalty?.mode, 'double', 'the longest block that ends by 2100 as a safe integer')
  t.strictSame(normalizePolicy({ ...base, penalty: undefined }), base, 'undefined is absent')
  t.equal(policyFingerprint(restart), 'fixed-window:5:1000~restart')
  t.equal(policyFingerprint(normalizePolicy({ algorithm: 'gcra', limit: 5, windowMs: 1000, penalty: { mode: 'double', maxMs: 8000 } })), 'gcra:5:1000:5~double.8000')
  for (const p of [restart, normalizePolicy({ algorithm: 'token-bucket', limit: 5, windowMs: 1000, burst: 7, penalty: 'double' })]) {
    t.same(policyOfFingerprint(policyFingerprint(p)), p, `the fingerprint names the policy: ${policyFingerprint(p)}`)
  }
  t.equal(policyOfFingerprint('fixed-window:5:1000~double'), undefined, 'double names its bound')
  t.equal(policyOfFingerprint('fixed-window:5:1000~restart.5'), undefined)
  t.notOk(samePolicy(restart, base as unknown as Policy))
  t.notOk(samePolicy(restart, normalizePolicy({ ...base, penalty: 'double' })))
  t.notOk(samePolicy(normalizePolicy({ ...base, penalty: { mode: 'double', maxMs: 2000 } }), normalizePolicy({ ...base, penalty: 'double' })))
  const bad: Array<[unknown, string, RegExp]> = [
    ['forever', 'policy.penalty', /'restart' or 'double'/],
    [{ mode: 'triple' }, 'policy.penalty.mode', /'restart' or 'double'/],
    [{ mode: 'restart', maxMs: 5000 }, 'policy.penalty.maxMs', /absent for mode 'restart'/],
    [{ mode: 'double', maxMs: 999 }, 'policy.penalty.maxMs', /at least windowMs \(1000\)/],
    [{ mode: 'double', maxMs: 1.5 }, 'policy.penalty.maxMs', /positive safe integer/],
    [{ mode: 'double', maxMs: 2 ** 53 }, 'policy.penalty.maxMs', /positive safe integer/],
    // A block's end, now + maxMs, must stay a safe integer: past it the Redis script's reply was
    // refused and every decision failed (503 for all, or the blocked client admitted with 'allow').
    [{ mode: 'double', maxMs: Number.MAX_SAFE_INTEGER }, 'policy', /penalty\.maxMs \+ 4102444800000 \(the end of the longest block/],
    [{ mode: 'double', maxMs: Number.MAX_SAFE_INTEGER - 4_102_444_800_000 + 1 }, 'policy', /got 9007199254740992/],
    [{ mode: 'double', max: 5000 }, 'policy.penalty.max', /no other keys/],
    [true, 'policy.penalty', /'restart', 'double' or a plain object/]
  ]
  for (const [penalty, path, message] of bad) {
    const error = invalid(() => normalizePolicy({ ...base, penalty }))
    t.equal(error.path, path, JSON.stringify(penalty))
    t.match(error.message, message)
  }
  t.throws(() => normalizePolicies([{ ...base, penalty: 'restart' }]), { path: 'policies[0].penalty', message: /absent in a list of policies/ })
})

t.test('property: any input either normalizes to a valid policy or throws RatesInvalidArgumentError', async (t) => {
  const num = fc.oneof(fc.integer({ min: -2, max: 2 ** 53 + 2 }), fc.constantFrom(0.5, NaN, Infinity, 2 ** 52, 2196, 1), fc.string({ maxLength: 2 }))
  const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined })
  const input = fc.record({
    algorithm: maybe(fc.constantFrom<unknown>(...ALGORITHMS, 'other', 1)),
    limit: maybe(num),
    windowMs: maybe(num),
    burst: maybe(num)
  }, { requiredKeys: [] })
  fc.assert(fc.property(input, (x) => {
    let policy: Readonly<Policy>
    try {
      policy = normalizePolicy(x)
    } catch (error) {
      return error instanceof RatesInvalidArgumentError && error.code === 'RATES_INVALID_ARGUMENT' && error.path.startsWith('policy')
    }
    const ok = (n: number) => Number.isSafeInteger(n) && n > 0
    const withBurst = policy.algorithm === 'token-bucket' || policy.algorithm === 'gcra'
    return Object.isFrozen(policy) && ok(policy.limit) && ok(policy.windowMs) &&
      (withBurst ? ok(policy.burst as number) : !('burst' in policy)) &&
      policy.limit === x.limit && policy.windowMs === x.windowMs && policy.algorithm === x.algorithm &&
      capacityOf(policy) === (withBurst ? (x.burst ?? x.limit) : x.limit) &&
      (withBurst || Number.isSafeInteger(2 * policy.windowMs))
  }), { numRuns: 3000 })
  t.pass('holds')
})
