import t from 'tap'
import fc from 'fast-check'
import { ipKey } from '../../lib/core/index.js'

// Independent reference: BigInt arithmetic over Node's own UTF-8 encoding (lone surrogates -> U+FFFD).
function refKey (s: string): number {
  let h = 0n
  for (const byte of Buffer.from(s, 'utf8')) h = (h * 131n + BigInt(byte)) % 4294967291n
  return Number(h)
}

t.test('known values', async (t) => {
  t.equal(ipKey(''), 0)
  t.equal(ipKey('1'), 49)
  t.equal(ipKey('12'), 49 * 131 + 50)
  t.equal(refKey('12'), 6469)
})

t.test('IPv4 and IPv6 addresses match the BigInt reference', async (t) => {
  for (const ip of ['127.0.0.1', '10.0.0.255', '192.168.1.100', '255.255.255.255', '::1', '::ffff:192.0.2.1',
    '2001:db8::8a2e:370:7334', 'fe80::1%eth0', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff']) {
    const k = ipKey(ip)
    t.equal(k, refKey(ip), ip)
    t.ok(Number.isSafeInteger(k) && k >= 0 && k < 4294967291, `${ip} in range`)
  }
})

t.test('non-ASCII, astral and lone surrogates hash their UTF-8 bytes', async (t) => {
  const cases = ['é', 'ü.1', '地址', '€', '😀', 'a😀b', '\uD800', '\uDC00', 'x\uD800y', '\uD83D', '\uD800\uD800\uDC00', '\uDC00\uD800']
  for (const s of cases) t.equal(ipKey(s), refKey(s), JSON.stringify(s))
  t.equal(ipKey('\uD800'), ipKey('\uFFFD'), 'lone high surrogate is U+FFFD')
  t.equal(ipKey('\uDC00'), ipKey('\uFFFD'), 'lone low surrogate is U+FFFD')
  t.equal(ipKey('x\uD800y'), refKey(new TextDecoder().decode(new TextEncoder().encode('x\uD800y'))), 'as TextEncoder encodes it')
})

t.test('property: equals the reference on any string, including lone surrogates', async (t) => {
  fc.assert(fc.property(fc.string({ unit: 'binary', maxLength: 64 }), (s) => ipKey(s) === refKey(s)))
  fc.assert(fc.property(fc.string({ unit: 'binary-ascii', maxLength: 64 }), (s) => ipKey(s) === refKey(s)))
  t.pass('holds')
})

t.test('property: deterministic and in [0, 4294967291)', async (t) => {
  fc.assert(fc.property(fc.string({ maxLength: 300 }), (s) => {
    const k = ipKey(s)
    return k === ipKey(s) && Number.isInteger(k) && k >= 0 && k < 4294967291
  }))
  t.pass('holds')
})
