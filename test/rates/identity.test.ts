import t from 'tap'
import fc from 'fast-check'
import { encodeIdentity, validateCost, MAX_IDENTITY_BYTES, MAX_IDENTITY_PARTS } from '../../lib/rates/identity.js'
import { RatesError, RatesInvalidArgumentError } from '../../lib/rates/errors.js'
import { invalid } from '../helpers/errors.js'

type Primitive = string | number | bigint | boolean

/** Structural, typed equality of identities: what the encoding must distinguish, and nothing more. */
function sameIdentity (a: unknown, b: unknown): boolean {
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => sameIdentity(x, b[i]))
  }
  if (typeof a === 'object' && typeof b === 'object' && a !== null && b !== null) {
    const ka = Object.keys(a).sort()
    const kb = Object.keys(b).sort()
    return sameIdentity(ka, kb) && ka.every((k) => sameIdentity((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]))
  }
  // -0 and 0 are one identity (===); NaN never occurs.
  return typeof a === typeof b && a === b
}

/** Reads the encoding back: a strict decoder, so encodeIdentity(x) determines x (injectivity). */
function decode (encoded: string): unknown {
  const tag = encoded[0]
  const body = encoded.slice(1)
  switch (tag) {
    case 'T': return parts(body).map(decodePrimitive)
    case 'R': {
      const ps = parts(body)
      if (ps.length % 2 !== 0) throw new Error(`odd record ${encoded}`)
      const out: Record<string, unknown> = {}
      // defineProperty, not assignment: a field named `__proto__` is an own field, not the prototype.
      for (let i = 0; i < ps.length; i += 2) Object.defineProperty(out, ps[i] as string, { value: decodePrimitive(ps[i + 1] as string), enumerable: true, writable: true, configurable: true })
      return out
    }
    default: return decodePrimitive(encoded)
  }
}
function decodePrimitive (encoded: string): Primitive {
  const body = encoded.slice(1)
  switch (encoded[0]) {
    case 's': return body
    case 'n': return Number(body)
    case 'b': return BigInt(body)
    case 't': if (body === '') return true; break
    case 'f': if (body === '') return false; break
  }
  throw new Error(`bad primitive ${encoded}`)
}
function parts (body: string): string[] {
  const out: string[] = []
  let i = 0
  while (i < body.length) {
    const colon = body.indexOf(':', i)
    const digits = body.slice(i, colon)
    if (!/^(0|[1-9]\d*)$/.test(digits)) throw new Error(`bad length ${digits}`)
    const n = Number(digits)
    if (colon + 1 + n > body.length) throw new Error('short part')
    out.push(body.slice(colon + 1, colon + 1 + n))
    i = colon + 1 + n
  }
  return out
}

// Small alphabets so that equal identities and near-collisions (separators, tags and digits inside
// strings) come up often.
const tricky = fc.string({ unit: fc.constantFrom('a', '1', ':', 's', 'n', 'b', 't', 'T', 'R', '2', ',', '"', 'é', '😀', '\0'), maxLength: 5 })
const primitive: fc.Arbitrary<Primitive> = fc.oneof(
  tricky,
  fc.integer({ min: -3, max: 3 }),
  fc.constantFrom(-0, 0.5, 1e21, -1e-7, Number.MAX_VALUE, Number.MIN_VALUE, 2 ** 53),
  fc.bigInt({ min: -3n, max: 3n }),
  fc.boolean()
)
const tuple = fc.array(primitive, { maxLength: 4 })
const record = fc.dictionary(tricky, primitive, { maxKeys: 4 })
const identity = fc.oneof(primitive, tuple, record)

t.test('typed: "1", 1, 1n, true and "true" are five identities', async (t) => {
  const values = ['1', 1, 1n, true, 'true', 't', false, 'f', 0, '0', 0n, 'n1', 'b1', 's1']
  const encodings = values.map(encodeIdentity)
  t.equal(new Set(encodings).size, values.length)
  t.same(encodings.slice(0, 5), ['s1', 'n1', 'b1', 't', 'strue'])
})

t.test('the format, by example', async (t) => {
  t.equal(encodeIdentity('alice'), 'salice')
  t.equal(encodeIdentity(''), 's')
  t.equal(encodeIdentity(-12.5), 'n-12.5')
  t.equal(encodeIdentity(-5n), 'b-5')
  t.equal(encodeIdentity(false), 'f')
  t.equal(encodeIdentity(['a', 1]), 'T2:sa2:n1')
  t.equal(encodeIdentity([]), 'T')
  t.equal(encodeIdentity({}), 'R')
  t.equal(encodeIdentity({ userId: 'u1', tenantId: 't1' }), 'R8:tenantId3:st16:userId3:su1')
  t.equal(encodeIdentity(['😀']), 'T3:s😀', 'lengths count UTF-16 code units')
})

t.test('numbers: canonical String() form, -0 is 0, large and tiny magnitudes', async (t) => {
  t.equal(encodeIdentity(-0), encodeIdentity(0))
  t.equal(encodeIdentity([-0]), encodeIdentity([0]))
  t.equal(encodeIdentity({ a: -0 }), encodeIdentity({ a: 0 }))
  t.equal(encodeIdentity(1e21), 'n1e+21')
  t.equal(encodeIdentity(1e21), encodeIdentity(1000000000000000000000))
  t.not(encodeIdentity(1e21), encodeIdentity('1e+21'))
  t.not(encodeIdentity(1e21), encodeIdentity(10n ** 21n))
  t.equal(encodeIdentity(0.1 + 0.2), 'n0.30000000000000004')
  t.not(encodeIdentity(0.1 + 0.2), encodeIdentity(0.3))
  t.equal(encodeIdentity(5e-324), 'n5e-324')
  t.equal(encodeIdentity(2 ** 53), 'n9007199254740992')
  t.not(encodeIdentity(2 ** 53), encodeIdentity(2 ** 53 + 2))
  t.equal(encodeIdentity(12345678901234567890n), 'b12345678901234567890')
})

t.test('shapes never meet: string, tuple and record', async (t) => {
  const values: unknown[] = [
    'a', ['a'], { a: 'a' }, 'T2:sa', 'R1:a2:sa', ['T2:sa'], { 1: 'a' }, ['1', 'a'], [], {}, '', [''], { '': '' },
    'T', 'R', ['T'], ['R'], { T: 'R' }
  ]
  const encodings = values.map(encodeIdentity)
  t.equal(new Set(encodings).size, values.length, encodings.join(' | '))
})

t.test('separators and length digits inside strings are just text', async (t) => {
  t.not(encodeIdentity(['a,b']), encodeIdentity(['a', 'b']))
  t.not(encodeIdentity(['a:b']), encodeIdentity(['a', 'b']))
  t.not(encodeIdentity(['2:sa']), encodeIdentity(['', 'a']))
  t.not(encodeIdentity(['sa2:sb']), encodeIdentity(['a', 'b']))
  t.not(encodeIdentity(['a2:sb']), encodeIdentity(['a', 'b']))
  t.not(encodeIdentity({ a: 'b', c: 'd' }), encodeIdentity({ a: 'b2:sd' }))
  t.not(encodeIdentity({ 'a1:b': 'c' }), encodeIdentity({ a: 'b' }))
  t.not(encodeIdentity({ ab: 'c' }), encodeIdentity({ a: 'bc' }))
  t.not(encodeIdentity(['1', '1']), encodeIdentity(['11']))
  t.not(encodeIdentity([1, 1]), encodeIdentity([11]))
  t.not(encodeIdentity(['10:' + 'x'.repeat(8)]), encodeIdentity(['x'.repeat(8)]))
  t.not(encodeIdentity({ a: 1 }), encodeIdentity(['a', 1]))
  t.not(encodeIdentity(['a', 'b']), encodeIdentity(['b', 'a']), 'tuple order matters')
})

t.test('record field order does not matter; the order is by UTF-16 code units', async (t) => {
  const a = encodeIdentity({ tenantId: 't', userId: 'u', region: 'eu' })
  t.equal(encodeIdentity({ userId: 'u', region: 'eu', tenantId: 't' }), a)
  t.equal(encodeIdentity({ region: 'eu', tenantId: 't', userId: 'u' }), a)
  // '\uFF61' sorts after '\uD83D' (the high surrogate of 😀) by code units, though 😀 is the higher code point.
  t.equal(encodeIdentity({ '\uFF61': 1, '😀': 2, B: 3, a: 4, 10: 5, 9: 6 }), 'R2:102:n51:92:n61:B2:n31:a2:n42:😀2:n21:｡2:n1')
  const nullProto = Object.assign(Object.create(null) as object, { userId: 'u', tenantId: 't', region: 'eu' })
  t.equal(encodeIdentity(nullProto), a, 'a null-prototype record is a plain record')
})

t.test('property: equal identities encode alike, different ones differently', async (t) => {
  fc.assert(fc.property(identity, identity, (a, b) => sameIdentity(a, b) === (encodeIdentity(a) === encodeIdentity(b))), { numRuns: 3000 })
  t.pass('holds')
})

t.test('property: the encoding decodes back to the identity (so it is injective)', async (t) => {
  fc.assert(fc.property(identity, (x) => {
    const encoded = encodeIdentity(x)
    const back = decode(encoded)
    return sameIdentity(back, x) && encodeIdentity(back) === encoded
  }), { numRuns: 3000 })
  // fast-check's counterexample once (seed -621942349): a field named `__proto__` is a field like any other.
  const proto = JSON.parse('{"__proto__":""}') as Record<string, string>
  t.equal(encodeIdentity(proto), 'R9:__proto__1:s')
  t.ok(sameIdentity(decode(encodeIdentity(proto)), proto))
  t.not(encodeIdentity(proto), encodeIdentity({}))
  // Any well-formed Unicode text, not only the tricky alphabet.
  const text = fc.string({ unit: 'binary', maxLength: 40 })
  fc.assert(fc.property(fc.oneof(text, fc.array(text, { maxLength: 5 }), fc.dictionary(text, text, { maxKeys: 5 })), (x) => {
    const back = decode(encodeIdentity(x))
    return sameIdentity(back, x)
  }))
  fc.assert(fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.bigInt(), (n, b) =>
    decode(encodeIdentity(n)) === (Object.is(n, -0) ? 0 : n) && decode(encodeIdentity(b)) === b))
  t.pass('holds')
})

t.test('property: shuffling a record\'s fields does not change its encoding', async (t) => {
  fc.assert(fc.property(record, fc.func(fc.integer()), (r, rank) => {
    const shuffled = Object.fromEntries(Object.entries(r).sort(([a], [b]) => rank(a) - rank(b) || (a < b ? -1 : 1)))
    return encodeIdentity(shuffled) === encodeIdentity(r)
  }))
  t.pass('holds')
})

t.test('limits: 16 items or fields pass, 17 do not', async (t) => {
  const items = Array.from({ length: MAX_IDENTITY_PARTS }, (_, i) => i)
  t.equal(MAX_IDENTITY_PARTS, 16)
  t.equal(encodeIdentity(items), 'T' + items.map((i) => `${String(i).length + 1}:n${i}`).join(''))
  const tooMany = [...items, 16]
  const e = invalid(() => encodeIdentity(tooMany))
  t.equal(e.path, 'identity')
  t.equal(e.value, tooMany)
  t.equal(e.message, 'Expected `identity` to be a tuple of at most 16 items, got 17 items')

  const fields = Object.fromEntries(items.map((i) => [`f${i}`, i]))
  // Fields in UTF-16 order (f0, f1, f10 … f15, f2 … f9), each as <length>:<name><length>:<value>.
  const sorted = Object.keys(fields).sort()
  t.equal(sorted[2], 'f10')
  t.equal(encodeIdentity(fields), 'R' + sorted.map((name) => `${name.length}:${name}${String(fields[name]).length + 1}:n${fields[name]}`).join(''))
  const moreFields = { ...fields, f16: 16 }
  const r = invalid(() => encodeIdentity(moreFields))
  t.equal(r.path, 'identity')
  t.equal(r.value, moreFields)
  t.equal(r.message, 'Expected `identity` to be a record of at most 16 fields, got 17 own properties')
})

t.test('limits: 1024 UTF-8 bytes pass, 1025 do not, multibyte characters counted as bytes', async (t) => {
  t.equal(MAX_IDENTITY_BYTES, 1024)
  const bytes = (s: string) => Buffer.byteLength(s, 'utf8')
  const cases: Array<[string, unknown, unknown]> = [
    // [what, an identity encoding to exactly 1024 bytes, one encoding to 1025]
    ['ASCII string', 'a'.repeat(1023), 'a'.repeat(1024)],
    ['2-byte é', 'é'.repeat(511) + 'a', 'é'.repeat(512)],
    ['3-byte €', '€'.repeat(341), '€'.repeat(341) + 'a'],
    ['4-byte 😀 (a surrogate pair)', '😀'.repeat(255) + 'abc', '😀'.repeat(256)],
    ['tuple', ['x'.repeat(1017)], ['x'.repeat(1018)]],
    ['tuple of €', ['€'.repeat(338) + 'xxxx'], ['€'.repeat(338) + 'xxxxx']],
    ['record', { k: 'x'.repeat(1014) }, { k: 'x'.repeat(1015) }],
    ['record with a multibyte field name', { ключ: '€'.repeat(335) + 'xxx' }, { ключ: '€'.repeat(335) + 'xxxx' }]
  ]
  for (const [what, fits, over] of cases) {
    t.equal(bytes(encodeIdentity(fits)), 1024, `${what}: 1024 bytes`)
    const e = invalid(() => encodeIdentity(over))
    t.equal(e.path, 'identity', what)
    t.equal(e.value, over, what)
    t.match(e.message, /^Expected `identity` to be an identity whose canonical encoding is at most 1024 UTF-8 bytes, got .*, which encodes to 1025 bytes$/, what)
  }
  // The short-string fast path ends where counting starts: 340 and 341 three-byte characters.
  t.equal(encodeIdentity('€'.repeat(340)), 's' + '€'.repeat(340))
  t.equal(encodeIdentity('€'.repeat(341)), 's' + '€'.repeat(341))
})

t.test('strings and field names must be well-formed Unicode', async (t) => {
  const lone = ['\ud800', '\udc00', 'a\ud83d', '\ude00b', '\udc00\ud800', '😀\ud800', 'x'.repeat(400) + '\ud800']
  for (const s of lone) {
    const e = invalid(() => encodeIdentity(s))
    t.equal(e.path, 'identity')
    t.equal(e.value, s)
    t.match(e.message, /^Expected `identity` to be a well-formed Unicode string \(no lone surrogates\), got /)
  }
  t.equal(encodeIdentity('\ud83d\ude00'), 's😀', 'a surrogate pair is fine')
  const inTuple = invalid(() => encodeIdentity(['ok', '\ud800']))
  t.equal(inTuple.path, 'identity[1]')
  t.equal(inTuple.message, "Expected `identity[1]` to be a well-formed Unicode string (no lone surrogates), got '\\ud800' (string)")
  const inValue = invalid(() => encodeIdentity({ userId: '\udfff' }))
  t.equal(inValue.path, 'identity.userId')
  const inName = invalid(() => encodeIdentity({ ['a\ud800']: 'x' }))
  t.equal(inName.path, 'identity["a\\ud800"]')
  t.equal(inName.value, 'a\ud800')
  t.match(inName.message, /^Expected `identity\["a\\ud800"\]` to be a field whose name is a well-formed Unicode string \(no lone surrogates\), got /)

  const unit = fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c))
  fc.assert(fc.property(fc.string({ unit: fc.oneof(unit, fc.constantFrom('\ud800', '\udc00', 'a')), maxLength: 6 }), (s) => {
    const wellFormed = !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s)
    try {
      return encodeIdentity(s) === 's' + s && wellFormed
    } catch (error) {
      return error instanceof RatesInvalidArgumentError && !wellFormed
    }
  }))
})

class Custom { id = 1 }
class Ids extends Array<string> {}

t.test('every other kind is rejected, with the path and the value', async (t) => {
  const fn = () => 1
  const sym = Symbol('s')
  const date = new Date(0)
  const custom = new Custom()
  const map = new Map()
  const boxed = new String('a')
  const ids = Ids.from(['a']) as Ids
  const sparse = ['a', , 'c']
  const nested = { a: 'x', b: { c: 1 } }
  const top = 'a string, a finite number, a bigint or a boolean, a tuple of at most 16 of those, or a plain record of at most 16 such fields'
  const prim = 'a string, a finite number, a bigint or a boolean'
  const cases: Array<[string, unknown, string, unknown, string]> = [
    // [what, identity, path, error value, message]
    ['undefined', undefined, 'identity', undefined, `Expected \`identity\` to be ${top}, got undefined (undefined)`],
    ['null', null, 'identity', null, `Expected \`identity\` to be ${top}, got null (null)`],
    ['a symbol', sym, 'identity', sym, `Expected \`identity\` to be ${top}, got Symbol(s) (symbol)`],
    ['a function', fn, 'identity', fn, `Expected \`identity\` to be ${top}, got [Function: fn] (function)`],
    ['NaN', NaN, 'identity', NaN, 'Expected `identity` to be a finite number, got NaN (number)'],
    ['Infinity', Infinity, 'identity', Infinity, 'Expected `identity` to be a finite number, got Infinity (number)'],
    ['-Infinity', -Infinity, 'identity', -Infinity, 'Expected `identity` to be a finite number, got -Infinity (number)'],
    ['a Date', date, 'identity', date, `Expected \`identity\` to be ${top}, got 1970-01-01T00:00:00.000Z`],
    ['a Map', map, 'identity', map, `Expected \`identity\` to be ${top}, got Map(0) {}`],
    ['a class instance', custom, 'identity', custom, `Expected \`identity\` to be ${top}, got Custom { id: 1 }`],
    ['a boxed string', boxed, 'identity', boxed, `Expected \`identity\` to be ${top}, got [String: 'a']`],
    ['an Array subclass', ids, 'identity', ids, `Expected \`identity\` to be ${top}, got Ids(1) [ 'a' ]`],
    ['a nested array', ['a', ['b']], 'identity[1]', ['b'], `Expected \`identity[1]\` to be ${prim}, got [ 'b' ]`],
    ['a nested object in a tuple', [1, 2, { c: 1 }], 'identity[2]', { c: 1 }, `Expected \`identity[2]\` to be ${prim}, got { c: 1 }`],
    ['a nested object in a record', nested, 'identity.b', { c: 1 }, `Expected \`identity.b\` to be ${prim}, got { c: 1 }`],
    ['null in a tuple', ['a', null], 'identity[1]', null, `Expected \`identity[1]\` to be ${prim}, got null (null)`],
    ['undefined in a tuple', [undefined], 'identity[0]', undefined, `Expected \`identity[0]\` to be ${prim}, got undefined (undefined)`],
    ['undefined in a record', { userId: undefined }, 'identity.userId', undefined, `Expected \`identity.userId\` to be ${prim}, got undefined (undefined)`],
    ['null in a record, odd field name', { 'user id': null }, 'identity["user id"]', null, `Expected \`identity["user id"]\` to be ${prim}, got null (null)`],
    ['NaN in a tuple', [NaN], 'identity[0]', NaN, 'Expected `identity[0]` to be a finite number, got NaN (number)'],
    ['Infinity in a record', { n: Infinity }, 'identity.n', Infinity, 'Expected `identity.n` to be a finite number, got Infinity (number)'],
    ['a symbol in a tuple', [sym], 'identity[0]', sym, `Expected \`identity[0]\` to be ${prim}, got Symbol(s) (symbol)`],
    ['a function in a record', { fn }, 'identity.fn', fn, `Expected \`identity.fn\` to be ${prim}, got [Function: fn] (function)`],
    ['a Date in a record', { at: date }, 'identity.at', date, `Expected \`identity.at\` to be ${prim}, got 1970-01-01T00:00:00.000Z`],
    ['a hole', sparse, 'identity[1]', undefined, `Expected \`identity[1]\` to be ${prim}, got a hole (the array is sparse)`],
    ['a hole at the end', new Array(2), 'identity[0]', undefined, `Expected \`identity[0]\` to be ${prim}, got a hole (the array is sparse)`],
    ['a symbol key', { a: 1, [sym]: 2 }, 'identity[Symbol(s)]', sym, 'Expected `identity[Symbol(s)]` to be a field with a string name (no symbol keys), got a symbol key']
  ]
  for (const [what, value, path, errorValue, message] of cases) {
    const e = invalid(() => encodeIdentity(value))
    t.ok(e instanceof RatesError, what)
    t.equal(e.code, 'RATES_INVALID_ARGUMENT', what)
    t.equal(e.path, path, what)
    t.strictSame(e.value, errorValue, what)
    t.equal(e.message, message, what)
  }
})

t.test('accessors and non-enumerable fields are rejected, and a getter is never invoked', async (t) => {
  let calls = 0
  const getter = () => { calls++; return 'x' }
  const record = Object.defineProperty({ a: 1 }, 'userId', { get: getter, enumerable: true })
  const e = invalid(() => encodeIdentity(record))
  t.equal(e.path, 'identity.userId')
  t.equal(e.message, 'Expected `identity.userId` to be a string, a finite number, a bigint or a boolean in a data property, got an accessor property (getter or setter), which is not invoked')
  t.equal((e.value as PropertyDescriptor).get, getter, 'the value is the descriptor')

  const setterOnly = Object.defineProperty({}, 'k', { set () {}, enumerable: true })
  t.equal(invalid(() => encodeIdentity(setterOnly)).path, 'identity.k')

  const items = ['a', 'b']
  Object.defineProperty(items, 1, { get: getter, enumerable: true })
  const i = invalid(() => encodeIdentity(items))
  t.equal(i.path, 'identity[1]')
  t.match(i.message, /in a data property, got an accessor property/)

  const hidden = Object.defineProperty({ a: 1 }, 'secret', { value: 's', enumerable: false })
  const h = invalid(() => encodeIdentity(hidden))
  t.equal(h.path, 'identity.secret')
  t.equal(h.value, 's')
  t.equal(h.message, "Expected `identity.secret` to be an enumerable field, got a non-enumerable property holding 's' (string)")
  t.equal(calls, 0, 'no getter ran')
})

t.test('a tuple is read by index; other own properties of the array are not part of it', async (t) => {
  const tagged = Object.assign(['a'], { note: 'ignored' })
  t.equal(encodeIdentity(tagged), encodeIdentity(['a']))
})

t.test('validateCost: default 1; a positive safe integer at most the capacity', async (t) => {
  t.equal(validateCost(undefined, 5), 1)
  t.equal(validateCost(1, 5), 1)
  t.equal(validateCost(5, 5), 5)
  t.equal(validateCost(Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER), Number.MAX_SAFE_INTEGER)
  for (const bad of [6, 0, -0, -1, 1.5, NaN, Infinity, Number.MAX_SAFE_INTEGER + 1, '1', 1n, null, true, {}]) {
    const e = invalid(() => validateCost(bad, 5))
    t.equal(e.path, 'cost')
    t.ok(Object.is(e.value, bad))
    t.match(e.message, /^Expected `cost` to be a positive safe integer at most the policy's capacity \(5\), got /)
  }
  t.equal(invalid(() => validateCost(0, 5)).message, "Expected `cost` to be a positive safe integer at most the policy's capacity (5), got 0 (number)")
  t.equal(invalid(() => validateCost(2, 1)).message, "Expected `cost` to be a positive safe integer at most the policy's capacity (1), got 2 (number)")
})
