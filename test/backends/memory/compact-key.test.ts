import t from 'tap'
import fc from 'fast-check'
import { compactKey } from '../../../lib/backends/memory/compact-key.js'

const octet = fc.integer({ min: 0, max: 255 })
const canonical = fc.tuple(octet, octet, octet, octet).map((parts) => parts.join('.'))

t.test('a canonical IPv4 address is its 32 bits, as a signed 32-bit integer', async (t) => {
  t.equal(compactKey('0.0.0.0'), 0)
  t.equal(compactKey('0.0.0.1'), 1)
  t.equal(compactKey('1.2.3.4'), 0x01020304)
  t.equal(compactKey('127.0.0.1'), 0x7f000001)
  t.equal(compactKey('255.255.255.255'), -1)
  t.equal(compactKey('128.0.0.0'), -0x80000000)
  fc.assert(fc.property(fc.tuple(octet, octet, octet, octet), ([a, b, c, d]) => {
    const value = compactKey(`${a}.${b}.${c}.${d}`)
    return value === (((a << 24) | (b << 16) | (c << 8) | d) | 0)
  }))
})

t.test('every other string stays itself', async (t) => {
  for (const key of ['', 'c0', '1.2.3', '1.2.3.4.5', '01.2.3.4', '1.02.3.4', '1.2.3.00', '256.0.0.1', '1.2.3.256',
    '1..2.3', '.1.2.3', '1.2.3.', '1.2.3.4 ', ' 1.2.3.4', '1.2.3.a', '1.2.3.-4', '1,2,3,4', '::ffff:1.2.3.4',
    '1.2.3.4/32', '100.200.300.1', '9999.1.1.1', '1.2.3.1234', '１.2.3.4']) {
    t.equal(compactKey(key), key, JSON.stringify(key))
  }
})

t.test('injective: two different keys never share an index key', async (t) => {
  const key = fc.oneof(canonical, fc.string({ maxLength: 16 }), fc.stringMatching(/^[0-9.]{7,15}$/))
  fc.assert(fc.property(key, key, (a, b) => a === b || compactKey(a) !== compactKey(b)), { numRuns: 20_000 })
  // And a number only ever comes from the one string that prints as it.
  fc.assert(fc.property(fc.stringMatching(/^[0-9.]{7,15}$/), (key) => {
    const value = compactKey(key)
    if (typeof value === 'string') return value === key
    const u = value >>> 0
    return `${u >>> 24}.${(u >>> 16) & 255}.${(u >>> 8) & 255}.${u & 255}` === key
  }), { numRuns: 20_000 })
})
