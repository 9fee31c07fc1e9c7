import t from 'tap'
import fc from 'fast-check'
import { attemptOf, isRetry, retryLimit } from '../../lib/core/attempt.js'

t.test('the attempt header: a decimal integer, 1 for a first attempt; anything unreadable is a first attempt', async (t) => {
  t.equal(attemptOf(undefined), 1, 'absent')
  t.equal(attemptOf('1'), 1)
  t.equal(attemptOf('2'), 2)
  t.equal(attemptOf('017'), 17, 'leading zeros are digits')
  for (const text of ['', '0', '-2', '+2', ' 2', '2 ', '2.0', '2, 3', 'two', '1e3', '0x2', '1234567890']) {
    t.equal(attemptOf(text), 1, `${JSON.stringify(text)} is a first attempt`)
  }
  t.equal(isRetry('2'), true)
  t.equal(isRetry('1'), false)
  t.equal(isRetry(undefined), false)
  t.equal(isRetry('999999999'), true)
})

t.test('no text makes an attempt number below 1 (the header never raises a priority)', async (t) => {
  fc.assert(fc.property(fc.string(), (text) => attemptOf(text) >= 1 && Number.isSafeInteger(attemptOf(text))))
})

t.test('retries stop below L - floor(share * L): the reserve is whole slots, none for a limit too small', async (t) => {
  t.equal(retryLimit(10, 0.1), 9)
  t.equal(retryLimit(100, 0.25), 75)
  t.equal(retryLimit(5, 0.1), 5, 'share * L < 1: no reserve')
  t.equal(retryLimit(10, 0), 10)
  fc.assert(fc.property(fc.integer({ min: 1, max: 1e6 }), fc.double({ min: 0, max: 0.999, noNaN: true }), (limit, share) => {
    const at = retryLimit(limit, share)
    return at >= 1 && at <= limit
  }))
})
