import t from 'tap'
import fc from 'fast-check'
import { rejection503, REJECTION_BODY } from '../../lib/core/index.js'

t.test('a 503 with the seed\'s 12-byte body', async (t) => {
  const r = rejection503(7)
  t.equal(r.status, 503)
  t.equal(r.body, 'lim rejected')
  t.equal(REJECTION_BODY, 'lim rejected')
  t.equal(Buffer.byteLength(r.body, 'utf8'), 12)
  t.same(r.headers, { 'retry-after': '7', 'content-type': 'text/plain; charset=utf-8', 'content-length': '12' })
})

t.test('retry-after is the decimal of a non-negative integer', async (t) => {
  const cases: Array<[number, string]> = [
    [0, '0'], [1, '1'], [60, '60'], [86400, '86400'],
    [0.1, '1'], [1.5, '2'], [2.0000001, '3'], // fractions round up
    [-1, '0'], [-0.5, '0'], [-0, '0'], [-1e300, '0'], // negatives are 0
    [NaN, String(Number.MAX_SAFE_INTEGER)], [Infinity, String(Number.MAX_SAFE_INTEGER)], [-Infinity, String(Number.MAX_SAFE_INTEGER)],
    [Number.MAX_SAFE_INTEGER, '9007199254740991'],
    [1e21, String(Number.MAX_SAFE_INTEGER)], [1e300, String(Number.MAX_SAFE_INTEGER)] // never exponent notation
  ]
  for (const [retry, header] of cases) t.equal(rejection503(retry).headers['retry-after'], header, `retry ${retry}`)
})

t.test('property: header is digits only, never below the retry for safe values', async (t) => {
  fc.assert(fc.property(fc.double(), (retry) => {
    const h = rejection503(retry).headers['retry-after']
    if (!/^(0|[1-9][0-9]*)$/.test(h)) return false
    const v = Number(h)
    return !(Number.isFinite(retry) && retry <= Number.MAX_SAFE_INTEGER) || (v >= retry && v === Math.max(0, Math.ceil(retry)))
  }))
  t.pass('holds')
})
