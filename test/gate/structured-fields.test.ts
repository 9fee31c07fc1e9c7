import t, { type Test } from 'tap'
import fc from 'fast-check'
import { deepStrictEqual } from 'node:assert'
import { Buffer } from 'node:buffer'
import { readdirSync, readFileSync } from 'node:fs'
import { parseList, Token as ParsedToken } from 'structured-headers'
import {
  LIST_SEPARATOR, MAX_INTEGER, StructuredFieldError, serializeBareItem, serializeBoolean, serializeByteSequence, serializeInteger,
  serializeItem, serializeItemStarts, serializeKey, serializeList, serializeParameters, serializeString, serializeToken,
  type BareItem, type Item, type Parameter, type StructuredFieldErrorCode
} from '../../lib/gate/headers/structured-fields.js'
import { thrown } from '../helpers/errors.js'

/** The error `fn` throws, which must be a StructuredFieldError with `code`. */
function refused (t: Test, fn: () => unknown, code: StructuredFieldErrorCode, message?: string): StructuredFieldError | undefined {
  const error = thrown(fn)
  if (!(error instanceof StructuredFieldError)) throw error
  t.equal(error.code, code, message ?? code)
  return error
}

// ---------------------------------------------------------------------------------------------
// The httpwg vectors (test/fixtures/structured-field-tests/, see its README): the test suite's
// JSON representation of each value, built into the serialiser's, must serialise to the canonical
// form (or to the raw one when there is no canonical); a must_fail case must throw.

type JsonBare = number | string | boolean | { __type: string, value: string }
type JsonItem = [JsonBare, Array<[string, JsonBare]>]
interface Vector {
  name: string
  header_type: 'item' | 'list'
  raw?: string[]
  canonical?: string[]
  expected: JsonItem | JsonItem[]
  must_fail?: boolean
}

const FIXTURES = new URL('../fixtures/structured-field-tests/', import.meta.url)
const vectorFiles = readdirSync(FIXTURES, { recursive: true }).map(String).filter((file) => file.endsWith('.json')).sort()

/** Which rule each file's must_fail cases break. */
const MUST_FAIL_CODES: Record<string, StructuredFieldErrorCode> = {
  'serialisation-tests/key-generated.json': 'ADMISSION_SF_INVALID_KEY',
  'serialisation-tests/number.json': 'ADMISSION_SF_INVALID_INTEGER',
  'serialisation-tests/string-generated.json': 'ADMISSION_SF_INVALID_STRING',
  'serialisation-tests/token-generated.json': 'ADMISSION_SF_INVALID_TOKEN'
}

/** RFC 4648 base32, which the test suite writes a Byte Sequence in. */
function base32 (text: string): Uint8Array {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'
  const bytes: number[] = []
  let buffer = 0
  let bits = 0
  for (const c of text.replace(/=+$/, '')) {
    const digit = alphabet.indexOf(c)
    if (digit === -1) throw new Error(`not base32: ${text}`)
    buffer = ((buffer << 5) | digit) & 0xffff
    bits += 5
    if (bits >= 8) {
      bits -= 8
      bytes.push((buffer >> bits) & 0xff)
    }
  }
  return Uint8Array.from(bytes)
}

function bareOf (value: JsonBare): BareItem {
  if (typeof value !== 'object') return value
  if (value.__type === 'token') return { token: value.value }
  if (value.__type === 'binary') return base32(value.value)
  throw new Error(`a kind the trimmed fixture does not hold: ${JSON.stringify(value)}`)
}
const itemOf = ([bare, parameters]: JsonItem): Item => [bareOf(bare), parameters.map(([key, value]): Parameter => [key, bareOf(value)])]

/** The vector's value, serialised: as an Item field or as a List field. */
function serializeVector (vector: Vector): string {
  if (vector.header_type === 'item') return serializeItem(...itemOf(vector.expected as JsonItem))
  return serializeList((vector.expected as JsonItem[]).map(itemOf))
}

/** The items of a vector, each as it stands in the field. */
const itemsOf = (vector: Vector): Item[] => vector.header_type === 'item' ? [itemOf(vector.expected as JsonItem)] : (vector.expected as JsonItem[]).map(itemOf)

let vectorCount = 0
for (const file of vectorFiles) {
  const vectors = JSON.parse(readFileSync(new URL(file, FIXTURES), 'utf8')) as Vector[]
  vectorCount += vectors.length
  t.test(`httpwg vectors: ${file}`, async (t) => {
    for (const vector of vectors) {
      if (vector.must_fail === true) {
        refused(t, () => serializeVector(vector), MUST_FAIL_CODES[file]!, `${vector.name}: throws`)
        continue
      }
      const serialized = serializeVector(vector)
      // An empty List's canonical form is no field at all: [], where serializeList gives ''.
      t.same(serialized === '' ? [] : [serialized], vector.canonical ?? vector.raw, vector.name)
    }
  })
}

t.test('httpwg vectors: every kept case ran (the README\'s count)', async (t) => {
  t.equal(vectorCount, 752)
  t.equal(vectorFiles.length, 18)
})

/**
 * An item as the hot path makes it: its start once, up to its trailing Integer parameters, then
 * each of those appended as serializeInteger gives it; undefined for an item that ends otherwise.
 */
function madeFromStarts ([bare, parameters]: Item): string | undefined {
  let fixed = parameters.length
  while (fixed > 0 && typeof parameters[fixed - 1]![1] === 'number') fixed--
  if (fixed === parameters.length) return undefined
  const open = parameters.slice(fixed)
  const starts = serializeItemStarts(bare, parameters.slice(0, fixed), open.map(([key]) => key) as [string, ...string[]])
  return starts.map((start, i) => start + serializeInteger(open[i]![1] as number)).join('')
}

t.test('httpwg vectors: each one with items that end in Integers, made the hot path\'s way, is the same', async (t) => {
  let items = 0
  for (const file of vectorFiles) {
    for (const vector of JSON.parse(readFileSync(new URL(file, FIXTURES), 'utf8')) as Vector[]) {
      if (vector.must_fail === true) continue
      const members = itemsOf(vector)
      const made = members.map(madeFromStarts)
      if (made.every((field) => field === undefined)) continue
      items += made.filter((field) => field !== undefined).length
      t.equal(made.map((field, i) => field ?? serializeItem(...members[i]!)).join(LIST_SEPARATOR), serializeVector(vector), `${file}: ${vector.name}`)
    }
  }
  t.ok(items > 1000, `${items} items made from starts`)
})

// ---------------------------------------------------------------------------------------------
// Each function, and each way it refuses.

t.test('Integer: its decimal digits within ±999,999,999,999,999; anything else throws', async (t) => {
  t.equal(serializeInteger(0), '0')
  t.equal(serializeInteger(-0), '0', '-0 is 0')
  t.equal(serializeInteger(42), '42')
  t.equal(serializeInteger(-42), '-42')
  t.equal(serializeInteger(MAX_INTEGER), '999999999999999')
  t.equal(serializeInteger(-MAX_INTEGER), '-999999999999999')
  for (const n of [MAX_INTEGER + 1, -MAX_INTEGER - 1, 1e21, 1.5, -0.5, NaN, Infinity, -Infinity]) {
    refused(t, () => serializeInteger(n), 'ADMISSION_SF_INVALID_INTEGER', `${n}`)
  }
  refused(t, () => serializeBareItem(2.5), 'ADMISSION_SF_INVALID_INTEGER', 'a Decimal is not an Integer, and Decimals are not serialised')
})

t.test('String: quoted, " and \\ escaped; printable ASCII only', async (t) => {
  t.equal(serializeString(''), '""')
  t.equal(serializeString('default'), '"default"')
  t.equal(serializeString('a "b" \\c\\'), '"a \\"b\\" \\\\c\\\\"')
  t.equal(serializeString(' ~'), '" ~"', 'the ends of the range: 0x20 and 0x7E')
  for (const s of ['café', 'tab\there', 'new\nline', '\x7f', '\x1f', '😀']) refused(t, () => serializeString(s), 'ADMISSION_SF_INVALID_STRING', JSON.stringify(s))
  refused(t, () => serializeString(42 as unknown as string), 'ADMISSION_SF_INVALID_STRING', 'not a string')
})

t.test('Token: as it is, once checked', async (t) => {
  t.equal(serializeToken({ token: 'text/html' }), 'text/html')
  t.equal(serializeToken({ token: '*' }), '*')
  t.equal(serializeBareItem({ token: 'Foo:bar' }), 'Foo:bar')
  for (const token of ['', '1a', 'a b', 'a"', 'a,b', 'é', '-a']) refused(t, () => serializeToken({ token }), 'ADMISSION_SF_INVALID_TOKEN', JSON.stringify(token))
  refused(t, () => serializeBareItem({ token: 7 } as unknown as BareItem), 'ADMISSION_SF_INVALID_TOKEN', 'a token that is not a string')
})

t.test('Byte Sequence: base64 with padding between colons, from any Uint8Array view', async (t) => {
  t.equal(serializeByteSequence(new Uint8Array()), '::')
  t.equal(serializeByteSequence(Buffer.from('hello')), ':aGVsbG8=:', 'a Buffer')
  const backing = Uint8Array.from([0, 1, 2, 0xfb, 0xff, 9])
  t.equal(serializeByteSequence(backing.subarray(3, 5)), ':+/8=:', 'a view into a larger buffer: its own bytes only')
  t.equal(serializeBareItem(Uint8Array.from([0x89])), ':iQ==:')
})

t.test('Boolean: ?1 and ?0', async (t) => {
  t.equal(serializeBoolean(true), '?1')
  t.equal(serializeBoolean(false), '?0')
  t.equal(serializeBareItem(false), '?0')
})

t.test('a bare item of another kind throws', async (t) => {
  const others: Array<[string, unknown]> = [['null', null], ['undefined', undefined], ['an object', {}], ['an array', []], ['a bigint', 1n],
    ['a symbol', Symbol('s')], ['a function', () => 1], ['an ArrayBuffer', new ArrayBuffer(1)], ['a Date', new Date(0)]]
  for (const [what, value] of others) refused(t, () => serializeBareItem(value as BareItem), 'ADMISSION_SF_INVALID_BARE_ITEM', what)
})

t.test('keys and Parameters: keys by the grammar, each once; a Boolean true as the bare key', async (t) => {
  t.equal(serializeKey('a'), 'a')
  t.equal(serializeKey('*a_b-c.d*9'), '*a_b-c.d*9')
  for (const key of ['', 'A', '1a', '_a', 'a b', 'a=b', 'é']) refused(t, () => serializeKey(key), 'ADMISSION_SF_INVALID_KEY', JSON.stringify(key))
  refused(t, () => serializeKey(1 as unknown as string), 'ADMISSION_SF_INVALID_KEY', 'not a string')
  t.equal(serializeParameters([]), '')
  t.equal(serializeParameters([['q', 10], ['w', 60], ['qu', 'requests'], ['pk', Uint8Array.from([1, 2, 3])], ['a', true], ['b', false], ['t', { token: 'x' }]]),
    ';q=10;w=60;qu="requests";pk=:AQID:;a;b=?0;t=x')
  refused(t, () => serializeParameters([['q', 1], ['q', 2]]), 'ADMISSION_SF_DUPLICATE_KEY', 'a key twice')
  refused(t, () => serializeParameters([['a', true], ['a', true]]), 'ADMISSION_SF_DUPLICATE_KEY', 'a Boolean key twice')
  refused(t, () => serializeParameters([['Q', 1]]), 'ADMISSION_SF_INVALID_KEY')
  refused(t, () => serializeParameters([['A', true]]), 'ADMISSION_SF_INVALID_KEY', 'a Boolean true under an invalid key')
})

t.test('Item and List', async (t) => {
  t.equal(serializeItem('default'), '"default"', 'no parameters')
  t.equal(serializeItem('default', [['q', 100], ['w', 60]]), '"default";q=100;w=60')
  t.equal(serializeList([]), '', 'an empty List: no field')
  t.equal(serializeList([['burst', [['q', 20], ['w', 12]]], ['daily', [['q', 1000], ['w', 86400]]]]), '"burst";q=20;w=12, "daily";q=1000;w=86400')
  t.equal(LIST_SEPARATOR, ', ')
  refused(t, () => serializeList([['ok', []], ['café', []]]), 'ADMISSION_SF_INVALID_STRING', 'one bad member: no field')
})

t.test('serializeItemStarts: the item cut after each open key, so that a request only appends values', async (t) => {
  const [start, tStart] = serializeItemStarts('default', [], ['r', 't'])
  t.same([start, tStart], ['"default";r=', ';t='])
  t.equal(start! + serializeInteger(19) + tStart! + serializeInteger(1), '"default";r=19;t=1')
  t.same(serializeItemStarts({ token: 'x' }, [['q', 5], ['a', true]], ['r']), ['x;q=5;a;r='], 'after fixed parameters')
  const [pkStart] = serializeItemStarts('daily', [['r', 3], ['t', 7]], ['pk'])
  t.equal(pkStart! + serializeByteSequence(Buffer.from('client')), '"daily";r=3;t=7;pk=:Y2xpZW50:', 'any bare item\'s serialisation may follow')
  refused(t, () => serializeItemStarts('default', [['r', 1]], ['r']), 'ADMISSION_SF_DUPLICATE_KEY', 'an open key among the fixed ones')
  refused(t, () => serializeItemStarts('default', [], ['r', 'r']), 'ADMISSION_SF_DUPLICATE_KEY', 'an open key twice')
  refused(t, () => serializeItemStarts('default', [], ['R']), 'ADMISSION_SF_INVALID_KEY')
  refused(t, () => serializeItemStarts('défaut', [], ['r']), 'ADMISSION_SF_INVALID_STRING')
})

t.test('StructuredFieldError: a TypeError with a stable code; the value kept, not enumerable', async (t) => {
  const error = refused(t, () => serializeString('café'), 'ADMISSION_SF_INVALID_STRING')!
  t.ok(error instanceof TypeError)
  t.equal(error.name, 'StructuredFieldError')
  t.equal(error.message, 'Expected a Structured Field String (printable ASCII, 0x20 to 0x7E), got \'café\' (string)')
  t.match(error.stack, /^StructuredFieldError: Expected/)
  t.equal(error.value, 'café')
  t.notOk(Object.keys(error).includes('value'), 'value is not enumerable')
  t.same(JSON.parse(JSON.stringify(error)), { name: 'StructuredFieldError', code: 'ADMISSION_SF_INVALID_STRING' })
})

// ---------------------------------------------------------------------------------------------
// Property: what the serialiser writes, an independent parser (structured-headers, RFC 9651)
// reads back as the same values.

const printable = Array.from({ length: 0x7f - 0x20 }, (_, i) => String.fromCharCode(0x20 + i))
const chars = (set: string): string[] => [...set]
const LCALPHA = chars('abcdefghijklmnopqrstuvwxyz')
const ALPHA = [...LCALPHA, ...chars('ABCDEFGHIJKLMNOPQRSTUVWXYZ')]
const DIGIT = chars('0123456789')
const TCHAR = [...ALPHA, ...DIGIT, ...chars("!#$%&'*+-.^_`|~")]

const integer = fc.oneof(
  fc.bigInt({ min: -BigInt(MAX_INTEGER), max: BigInt(MAX_INTEGER) }).map(Number),
  fc.integer({ min: -1000, max: 1000 }),
  fc.constantFrom(MAX_INTEGER, -MAX_INTEGER, 0)
)
// `"` and `\` weighted up: the escapes are where a serialiser goes wrong.
const string = fc.string({ unit: fc.oneof({ arbitrary: fc.constantFrom('"', '\\'), weight: 1 }, { arbitrary: fc.constantFrom(...printable), weight: 4 }), maxLength: 30 })
const token = fc.tuple(fc.constantFrom(...ALPHA, '*'), fc.string({ unit: fc.constantFrom(...TCHAR, ':', '/'), maxLength: 20 })).map(([first, rest]) => ({ token: first + rest }))
const bytes = fc.uint8Array({ maxLength: 40 })
const bareItem: fc.Arbitrary<BareItem> = fc.oneof(integer, string, token, bytes, fc.boolean())
const key = fc.tuple(fc.constantFrom(...LCALPHA, '*'), fc.string({ unit: fc.constantFrom(...LCALPHA, ...DIGIT, '_', '-', '.', '*'), maxLength: 8 })).map(([first, rest]) => first + rest)
const parameters = fc.uniqueArray(fc.tuple(key, bareItem), { selector: ([k]) => k, maxLength: 5 })
const item: fc.Arbitrary<Item> = fc.tuple(bareItem, parameters)

/** A value as both sides can be compared in: tokens and bytes as plain data. */
function plain (value: unknown): unknown {
  if (value instanceof ParsedToken) return { token: value.toString() }
  if (value instanceof ArrayBuffer) return { bytes: [...new Uint8Array(value)] }
  if (value instanceof Uint8Array) return { bytes: [...value] }
  if (typeof value === 'object' && value !== null) return { token: (value as { token: string }).token }
  return value
}
const plainItem = ([bare, params]: Item): unknown => [plain(bare), params.map(([k, v]) => [k, plain(v)])]
const parsedItems = (field: string): unknown[] => parseList(field).map((member) => {
  const [bare, params] = member as [unknown, Map<string, unknown>]
  return [plain(bare), [...params].map(([k, v]) => [k, plain(v)])]
})

t.test('property: any List serialised parses back (structured-headers) to the same items', async (t) => {
  fc.assert(fc.property(fc.array(item, { maxLength: 6 }), (items) => {
    deepStrictEqual(parsedItems(serializeList(items)), items.map(plainItem))
  }), { numRuns: 2000 })
  t.pass('2000 random Lists')
})

t.test('property: an item made the hot path\'s way (starts once, then Integers) parses back the same', async (t) => {
  const openKeys = fc.uniqueArray(key, { minLength: 1, maxLength: 3 })
  fc.assert(fc.property(fc.array(fc.tuple(bareItem, parameters, openKeys, fc.array(integer, { minLength: 3, maxLength: 3 })), { minLength: 1, maxLength: 4 }), (members) => {
    const expected: Item[] = []
    const fields: string[] = []
    for (const [bare, fixed, open, values] of members) {
      const rest = open.filter((k) => !fixed.some(([f]) => f === k))
      if (rest.length === 0) continue
      const starts = serializeItemStarts(bare, fixed, rest as [string, ...string[]])
      fields.push(starts.map((start, i) => start + serializeInteger(values[i]!)).join(''))
      expected.push([bare, [...fixed, ...rest.map((k, i): Parameter => [k, values[i]!])]])
    }
    deepStrictEqual(parsedItems(fields.join(LIST_SEPARATOR)), expected.map(plainItem))
  }), { numRuns: 1000 })
  t.pass('1000 random Lists made from starts')
})
