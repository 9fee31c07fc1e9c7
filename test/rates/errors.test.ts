import t from 'tap'
import {
  RatesError,
  RatesInvalidArgumentError,
  RatesPolicyConflictError,
  RatesUnavailableError,
  RatesStoppedError,
  memberPath,
  type RatesErrorCode
} from '../../lib/rates/errors.js'

const tokenBucket = Object.freeze({ algorithm: 'token-bucket' as const, limit: 100, windowMs: 60_000, burst: 20 })
const fixedWindow = Object.freeze({ algorithm: 'fixed-window' as const, limit: 100, windowMs: 60_000 })

t.test('every error is a RatesError and an Error, named after its class, with its stable code', async (t) => {
  const errors: Array<[RatesError, string, RatesErrorCode]> = [
    [new RatesInvalidArgumentError('cost', 'a positive safe integer', 0), 'RatesInvalidArgumentError', 'RATES_INVALID_ARGUMENT'],
    [new RatesPolicyConflictError('send', tokenBucket, fixedWindow), 'RatesPolicyConflictError', 'RATES_POLICY_CONFLICT'],
    [new RatesUnavailableError('full'), 'RatesUnavailableError', 'RATES_UNAVAILABLE'],
    [new RatesStoppedError(), 'RatesStoppedError', 'RATES_STOPPED']
  ]
  for (const [error, name, code] of errors) {
    t.ok(error instanceof RatesError, name)
    t.ok(error instanceof Error, name)
    t.equal(error.name, name)
    t.equal(error.constructor.name, name)
    t.equal(error.code, code)
    t.match(error.stack, new RegExp(`^${name}: `))
  }
  t.equal(new Set(errors.map(([e]) => e.code)).size, 4, 'four distinct codes')
})

t.test('RatesInvalidArgumentError: path, value, message in the style "Expected `x` to be y, got z"', async (t) => {
  const e = new RatesInvalidArgumentError('policy.limit', 'a positive safe integer', 0)
  t.equal(e.path, 'policy.limit')
  t.equal(e.value, 0)
  t.equal(e.message, 'Expected `policy.limit` to be a positive safe integer, got 0 (number)')
  const s = new RatesInvalidArgumentError('identity', 'a string', 'x'.repeat(100))
  t.match(s.message, /^Expected `identity` to be a string, got 'x+'\.\.\. 20 more characters \(string\)$/)
  const o = new RatesInvalidArgumentError('identity[0]', 'a primitive', [1, 2])
  t.equal(o.message, 'Expected `identity[0]` to be a primitive, got [ 1, 2 ]')
  t.same(o.value, [1, 2])
  const custom = new RatesInvalidArgumentError('policy', 'a safe integer', { limit: 1 }, { subject: 'policy.limit * policy.windowMs', got: '2 ** 53' })
  t.equal(custom.message, 'Expected `policy.limit * policy.windowMs` to be a safe integer, got 2 ** 53')
  t.equal(custom.path, 'policy')
  t.same(custom.value, { limit: 1 })
  t.equal(new RatesInvalidArgumentError('cost', 'one', undefined).message, 'Expected `cost` to be one, got undefined (undefined)')
  t.equal(new RatesInvalidArgumentError('cost', 'one', null).message, 'Expected `cost` to be one, got null (null)')
})

t.test('RatesPolicyConflictError: the limiter name and both policies', async (t) => {
  const e = new RatesPolicyConflictError('send-message', tokenBucket, fixedWindow)
  t.equal(e.limiterName, 'send-message')
  t.equal(e.name, 'RatesPolicyConflictError', 'name stays the class name')
  t.equal(e.existing, tokenBucket)
  t.equal(e.requested, fixedWindow)
  t.equal(e.message,
    'Rate limiter "send-message" already has the policy { algorithm: \'token-bucket\', limit: 100, windowMs: 60000, burst: 20 }, ' +
    'got { algorithm: \'fixed-window\', limit: 100, windowMs: 60000 }')
})

t.test('RatesUnavailableError: retryAfterMs and cause only when given', async (t) => {
  const bare = new RatesUnavailableError('the memory backend is full')
  t.equal(bare.message, 'The rates backend cannot decide: the memory backend is full')
  t.equal(bare.retryAfterMs, undefined)
  t.notOk('retryAfterMs' in bare)
  t.notOk('cause' in bare)

  const cause = new Error('ECONNREFUSED')
  const full = new RatesUnavailableError('redis is unreachable', { retryAfterMs: 250, cause })
  t.equal(full.message, 'The rates backend cannot decide: redis is unreachable (retry after 250 ms)')
  t.equal(full.retryAfterMs, 250)
  t.equal(full.cause, cause)

  const zero = new RatesUnavailableError('full', { retryAfterMs: 0 })
  t.equal(zero.retryAfterMs, 0)
  t.equal(zero.message, 'The rates backend cannot decide: full (retry after 0 ms)')
  t.notOk('cause' in zero)

  const undefinedCause = new RatesUnavailableError('failed', { cause: undefined })
  t.ok('cause' in undefinedCause, 'an explicit cause is kept, even undefined')
  t.notOk('retryAfterMs' in undefinedCause)
})

t.test('RatesStoppedError: with and without the limiter name', async (t) => {
  const named = new RatesStoppedError('send-message')
  t.equal(named.limiterName, 'send-message')
  t.equal(named.message, 'Rate limiter "send-message" has stopped (its Fastify instance closed or its backend was replaced)')
  const bare = new RatesStoppedError()
  t.notOk('limiterName' in bare)
  t.equal(bare.message, 'The rates capability has stopped (its Fastify instance closed or its backend was replaced)')
})

t.test('memberPath: dots for identifiers, brackets and JSON otherwise', async (t) => {
  t.equal(memberPath('identity', 'userId'), 'identity.userId')
  t.equal(memberPath('identity', '_a$1'), 'identity._a$1')
  t.equal(memberPath('identity', 'user-id'), 'identity["user-id"]')
  t.equal(memberPath('identity', '1'), 'identity["1"]')
  t.equal(memberPath('identity', ''), 'identity[""]')
  t.equal(memberPath('policy', 'a"b'), 'policy["a\\"b"]')
  t.equal(memberPath('identity', '\ud800'), 'identity["\\ud800"]')
})

// The messages above print values with lib/errors.ts's show(), so loading this file loads that
// module too, and tap's coverage map then wants all of it covered here as well.
t.test('lib/errors.ts, shared with the gate: show() and the gate\'s own errors', async (t) => {
  const { show, AdmissionError, AdmissionOptionError, AdmissionKeyError } = await import('../../lib/gate/errors.js')
  t.equal(show(1n), '1n (bigint)')
  t.equal(show(Symbol('k')), 'Symbol(k) (symbol)')
  t.equal(show({ a: { b: { c: 1 } } }), '{ a: { b: [Object] } }')
  const option = new AdmissionOptionError('cost', 'a positive safe integer', -1)
  t.ok(option instanceof AdmissionError)
  t.notOk(option instanceof RatesError, 'the gate\'s errors and the rates errors are separate families')
  t.equal(option.message, 'Expected `cost` to be a positive safe integer, got -1 (number)')
  const key = new AdmissionKeyError(5, 'a value of type number')
  t.equal(key.code, 'ADMISSION_INVALID_KEY')
  t.equal(key.value, 5)
  t.equal(key.message, 'Expected the `key` option to return a string of at most 1024 UTF-8 bytes, got a value of type number', 'the message never shows the value')
})
