import t from 'tap'
import { originHolds, retryTime, type RetryInput } from '../../lib/client/plan.js'
import { RETRY_ATTEMPT_HEADER, withAttempt } from '../../lib/client/attempt-header.js'
import { replayableBody } from '../../lib/client/retried-request.js'
import { Readable } from 'node:stream'

const AT = 1_700_000_000_000
const BASE: RetryInput = { headers: {}, receivedAt: AT, retry: 1, holdUntil: 0, baseDelayMs: 100, maxDelayMs: 10_000, maxWaitMs: 60_000, random: 0.5 }

t.test('retryTime: Retry-After exactly, else full jitter; never before the origin\'s hold', async (t) => {
  t.strictSame(retryTime({ ...BASE, headers: { 'retry-after': '2' } }), { at: AT + 2000, advertised: true })
  t.strictSame(retryTime(BASE), { at: AT + 50, advertised: false }, 'no time given: jitter in [0, 100]')
  t.strictSame(retryTime({ ...BASE, holdUntil: AT + 700 }), { at: AT + 700, advertised: true }, 'the jitter would be earlier than the pause: the pause')
  t.strictSame(retryTime({ ...BASE, headers: { 'retry-after': '1' }, holdUntil: AT + 3000 }), { at: AT + 3000, advertised: true })
  t.equal(retryTime({ ...BASE, headers: { 'retry-after': '61' } }), undefined, 'longer than maxWaitMs: not retried')
  t.strictSame(retryTime({ ...BASE, headers: { 'retry-after': '60' } }), { at: AT + 60_000, advertised: true }, 'exactly maxWaitMs: retried')
})

t.test('originHolds: a 503\'s Retry-After pauses the origin, spent RateLimit fields pace it, within maxWaitMs', async (t) => {
  t.strictSame(originHolds(503, { 'retry-after': '1' }, AT, 60_000), { pauseUntil: AT + 1000, quotaUntil: undefined })
  t.strictSame(originHolds(429, { 'retry-after': '1' }, AT, 60_000), { pauseUntil: undefined, quotaUntil: undefined }, 'a 429 waits for its own request only')
  t.strictSame(originHolds(429, { 'retry-after': '1', ratelimit: '"default";r=0;t=1' }, AT, 60_000), { pauseUntil: undefined, quotaUntil: AT + 1000 })
  t.strictSame(originHolds(503, { 'retry-after': '120', ratelimit: '"d";r=0;t=120' }, AT, 60_000), { pauseUntil: undefined, quotaUntil: undefined }, 'longer than maxWaitMs: not held')
})

t.test('withAttempt: the header set in every shape undici takes, the caller\'s own replaced, its object untouched', async (t) => {
  t.strictSame(withAttempt(undefined, 1), { [RETRY_ATTEMPT_HEADER]: '1' })
  t.strictSame(withAttempt(null, 1), { [RETRY_ATTEMPT_HEADER]: '1' })
  const object = { accept: 'text/plain', 'Retry-Attempt': '9' }
  t.strictSame(withAttempt(object, 2), { accept: 'text/plain', 'retry-attempt': '2' })
  t.strictSame(object, { accept: 'text/plain', 'Retry-Attempt': '9' }, 'not changed')
  const flat = ['accept', 'text/plain', 'RETRY-ATTEMPT', '9']
  t.strictSame(withAttempt(flat, 3), ['accept', 'text/plain', 'retry-attempt', '3'])
  t.equal(flat.length, 4)
  t.strictSame(withAttempt(new Map([['accept', 'a'], ['retry-attempt', '1']]) as never, 2), ['accept', 'a', 'retry-attempt', '2'], 'pairs: a flat array')
  t.strictSame(withAttempt(['odd'], 1), ['odd', 'retry-attempt', '1'], 'an odd array stays odd, for undici to refuse')
})

t.test('replayableBody: none, a string or bytes; not a stream or an iterable', async (t) => {
  for (const body of [undefined, null, 'text', Buffer.from('x'), new Uint8Array(1)]) t.ok(replayableBody(body))
  for (const body of [Readable.from(['x']), (async function * () { yield 'x' })(), new FormData()]) t.notOk(replayableBody(body))
})
