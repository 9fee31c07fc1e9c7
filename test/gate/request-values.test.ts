// Values that come from a request (what `key` or `tier` made of it) are never logged or
// serialised whole: an error keeps the value for the application's own error handler, out of
// reach of loggers and JSON.
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import admission, { AdmissionOptionError, RatesInvalidArgumentError } from '../../lib/index.js'
import { AdmissionKeyError, AdmissionTierError } from '../../lib/gate/errors.js'
import { show } from '../../lib/validation/show.js'

const BIG = 5 * 1024 * 1024

async function logged (t: Test, options: Parameters<typeof admission>[1], headers: Record<string, string>): Promise<{ app: FastifyInstance, lines: string[] }> {
  const lines: string[] = []
  const app = Fastify({ logger: { level: 'info', stream: { write: (line: string) => { lines.push(line) } } } })
  await app.register(admission, options)
  app.get('/', async () => 'ok')
  await app.ready()
  const res = await app.inject({ url: '/', headers })
  t.equal(res.statusCode, 500)
  t.ok(res.body.length < 1000, `the 500 is short (${res.body.length} bytes)`)
  return { app, lines }
}

const longest = (lines: string[]): number => Math.max(...lines.map((line) => line.length))

t.test('a 5 MB tier() value: a short log line, the value kept (not enumerable) for an error handler', async (t) => {
  const { app, lines } = await logged(t, { rateLimit: { tiers: { free: { limit: 5, windowMs: 1000 } }, tier: (request) => String(request.headers['x-plan']).repeat(BIG / 8) } }, { 'x-plan': 'premium!' })
  t.teardown(() => app.close())
  t.ok(lines.some((line) => line.includes('ADMISSION_UNKNOWN_TIER')), 'the error is logged')
  t.ok(longest(lines) < 4096, `no log line carries the value (longest: ${longest(lines)} characters)`)
})

t.test('a 5 MB key: a short log line', async (t) => {
  const { app, lines } = await logged(t, { key: (request) => String(request.headers['x-token']).repeat(BIG / 8) }, { 'x-token': 'sk_live!' })
  t.teardown(() => app.close())
  t.ok(lines.some((line) => line.includes('ADMISSION_INVALID_KEY')))
  t.ok(longest(lines) < 4096, `no log line carries the key (longest: ${longest(lines)} characters)`)
  t.notOk(lines.some((line) => line.includes('sk_live!sk_live!')), 'nor a repeat of it')
})

t.test('the errors keep `value`, not enumerable: JSON and spreading never copy it', async (t) => {
  const value = 'x'.repeat(BIG)
  const errors = [
    new AdmissionKeyError(value, 'a string'),
    new AdmissionTierError(value, ['free']),
    new AdmissionOptionError('rateLimit', 'a policy', value),
    new RatesInvalidArgumentError('identity', 'at most 1024 bytes', value)
  ]
  for (const error of errors) {
    t.equal((error as { value: unknown }).value, value, `${error.name}: value kept`)
    t.notOk(Object.keys(error).includes('value'), `${error.name}: not enumerable`)
    t.ok(JSON.stringify(error).length < 1000, `${error.name}: JSON without it`)
    t.ok(error.message.length < 1000, `${error.name}: a short message (${error.message.length})`)
  }
})

t.test('show(): short whatever it is given, marked where it cut', async (t) => {
  const wide = Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`field${i}`, i]))
  const longName = { ['k'.repeat(100_000)]: 1 }
  for (const value of [wide, longName, 'y'.repeat(BIG), ['z'.repeat(BIG)], new Map([['k'.repeat(BIG), 1]])]) {
    const text = show(value)
    t.ok(text.length <= 200, `${text.slice(0, 40)}…: ${text.length} characters`)
  }
  t.match(show(wide), /… \(\d+ characters\)$/, 'a cut is marked, with the whole length')
  t.equal(show(5), '5 (number)', 'a short value as it was')
  t.equal(show('ok'), "'ok' (string)")
})
