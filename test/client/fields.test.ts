import t from 'tap'
import { quotaBackAt, listMembers } from '../../lib/client/rate-limit-fields.js'
import { retryAfterTime, wholeSeconds } from '../../lib/client/retry-after.js'

const AT = 1_700_000_000_000

t.test('Retry-After: delta-seconds from when the response was read, an HTTP-date as it says', async (t) => {
  t.equal(retryAfterTime('5', AT), AT + 5000)
  t.equal(retryAfterTime(' 0 ', AT), AT)
  t.equal(retryAfterTime('Tue, 14 Nov 2023 22:13:30 GMT', AT), AT + 10_000, 'an IMF-fixdate')
  t.equal(retryAfterTime('Tuesday, 14-Nov-23 22:13:30 GMT', AT), AT + 10_000, 'RFC 850')
  t.equal(retryAfterTime('Tue, 14 Nov 2023 22:13:10 GMT', AT), AT, 'a date already past: now')
  t.equal(retryAfterTime('2023-11-14T22:13:30Z', AT), undefined, 'not an HTTP-date, though Date.parse reads it')
  t.equal(retryAfterTime(['1', '3'], AT), AT + 3000, 'repeated: the latest')
  t.equal(retryAfterTime(['soon', '2'], AT), AT + 2000, 'an unreadable value among them is skipped')
  t.equal(retryAfterTime(undefined, AT), undefined)
  t.equal(retryAfterTime('soon', AT), undefined)
  t.equal(retryAfterTime('-1', AT), undefined, 'no sign: not delta-seconds, and not a date')
  t.equal(retryAfterTime('1.5', AT), AT + 2000, 'a fraction, which the field does not allow: rounded up')
  t.equal(retryAfterTime('99999999999999999999', AT), AT + 1_000_000_000_000, 'a huge delta is capped, an exact integer')
  t.equal(wholeSeconds('007'), 7)
})

t.test('listMembers: commas inside quoted strings and escapes stay in their member', async (t) => {
  t.strictSame(listMembers('"a,b";r=1, "c\\"d,";r=0 ,, x'), ['"a,b";r=1', '"c\\"d,";r=0', 'x'])
})

t.test('the RateLimit fields: a time only when a policy has nothing left and says when it is back', async (t) => {
  const back = (headers: Record<string, string | string[]>): number | undefined => quotaBackAt(headers, AT)
  t.equal(back({ ratelimit: '"default";r=0;t=5' }), AT + 5000, 'draft 11')
  t.equal(back({ ratelimit: '"burst";r=0;t=1, "day";r=0;t=30' }), AT + 30_000, 'draft 11, two spent policies: the later')
  t.equal(back({ ratelimit: '"burst";r=3;t=1, "day";r=0;t=30' }), AT + 30_000, 'one spent among others')
  t.equal(back({ ratelimit: '"default";r=4;t=5' }), undefined, 'some left')
  t.equal(back({ ratelimit: '"default";r=0' }), undefined, 'spent but no t: no time to wait for')
  t.equal(back({ ratelimit: 'limit=10, remaining=0, reset=7' }), AT + 7000, 'draft 7')
  t.equal(back({ ratelimit: 'limit=10, remaining=2, reset=7' }), undefined)
  t.equal(back({ ratelimit: ['limit=10, remaining=0, reset=7', '"x";r=0;t=9'] }), AT + 9000, 'repeated field: the later')
  t.equal(back({ 'ratelimit-remaining': '0', 'ratelimit-reset': '4' }), AT + 4000, 'draft 6')
  t.equal(back({ 'ratelimit-remaining': '0', 'ratelimit-reset': 'later' }), undefined)
  t.equal(back({ 'ratelimit-remaining': '0' }), undefined)
  t.equal(back({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '3' }), AT + 3000, 'x-ratelimit, delta-seconds')
  t.equal(back({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(AT / 1000 + 20) }), AT + 20_000, 'x-ratelimit, seconds since the epoch')
  t.equal(back({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(AT / 1000 - 20) }), AT, 'an epoch already past: now')
  t.equal(back({ 'x-ratelimit-remaining': '1', 'x-ratelimit-reset': String(AT / 1000 + 20) }), undefined)
  t.equal(back({ 'x-ratelimit-remaining': ['0'], 'x-ratelimit-reset': '2', ratelimit: '"d";r=0;t=1' }), AT + 2000, 'several formats: the latest')
  t.equal(back({}), undefined)
})
