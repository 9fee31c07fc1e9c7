// `headers: { format }`: the fields each kind of client reads, byte for byte as its draft's examples
// and @fastify/rate-limit's tests write them, read back on real sockets by the parser those clients
// use — `ratelimit-header-parser` (the express-rate-limit family's) for drafts 6 and 7 and
// `x-ratelimit-*`, `structured-headers` for draft 11.
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import cors from '@fastify/cors'
import { parseRateLimit } from 'ratelimit-header-parser'
import { parseList, type Item } from 'structured-headers'
import admission, { memoryBackend, type AdmissionOptions, type RatesBackend } from '../../lib/index.js'
import { deferred, eventually, get, listen, type Answer } from '../helpers/http.js'

type Fields = Record<string, string | undefined>
const NAMES = ['ratelimit', 'ratelimit-policy', 'ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'retry-after']

/** The rate-limit fields of an answer (and its Retry-After), by name. */
function fields (answer: Answer): Fields {
  return Object.fromEntries(NAMES.filter((name) => answer.headers[name] !== undefined).map((name) => [name, String(answer.headers[name])]))
}

const TWO_A_MINUTE = { limit: 2, windowMs: 60_000 }
const STACK = [{ limit: 2, windowMs: 60_000 }, { limit: 5, windowMs: 3_600_000 }]

async function served (t: Test, options: AdmissionOptions, extra?: (app: FastifyInstance) => void): Promise<number> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, options)
  app.get('/', async () => 'ok')
  app.get('/stack', { config: { admission: { rateLimit: STACK } } }, async () => 'ok')
  extra?.(app)
  return listen(app)
}

/** Three requests to `path` (2 a minute): two admitted, one refused. */
async function three (port: number, path = '/'): Promise<Answer[]> {
  return [await get(port, path), await get(port, path), await get(port, path)]
}

// A token every 30 s: after the first request 1 left and full in 30 s; after the second none left and
// full in 60 s; the refusal's reset is its Retry-After (the next token), as the drafts ask.
const EXPECTED: Record<string, Fields[]> = {
  'draft-7': [
    { ratelimit: 'limit=2, remaining=1, reset=30', 'ratelimit-policy': '2;w=60' },
    { ratelimit: 'limit=2, remaining=0, reset=60', 'ratelimit-policy': '2;w=60' },
    { ratelimit: 'limit=2, remaining=0, reset=30', 'ratelimit-policy': '2;w=60', 'retry-after': '30' }
  ],
  'draft-6': [
    { 'ratelimit-limit': '2', 'ratelimit-remaining': '1', 'ratelimit-reset': '30', 'ratelimit-policy': '2;w=60' },
    { 'ratelimit-limit': '2', 'ratelimit-remaining': '0', 'ratelimit-reset': '60', 'ratelimit-policy': '2;w=60' },
    { 'ratelimit-limit': '2', 'ratelimit-remaining': '0', 'ratelimit-reset': '30', 'ratelimit-policy': '2;w=60', 'retry-after': '30' }
  ],
  'x-ratelimit': [
    { 'x-ratelimit-limit': '2', 'x-ratelimit-remaining': '1', 'x-ratelimit-reset': '30' },
    { 'x-ratelimit-limit': '2', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '60' },
    { 'x-ratelimit-limit': '2', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '30', 'retry-after': '30' }
  ]
}

for (const [format, expected] of Object.entries(EXPECTED)) {
  t.test(`${format}: byte for byte, and read by ratelimit-header-parser`, async (t) => {
    const port = await served(t, { rateLimit: TWO_A_MINUTE, headers: { format: format as 'draft-7' } })
    const answers = await three(port)
    t.same(answers.map((a) => a.status), [200, 200, 429])
    t.strictSame(answers.map(fields), expected)
    for (const [i, answer] of answers.entries()) {
      const read = parseRateLimit(answer.headers as Record<string, string>)!
      t.same({ limit: read.limit, remaining: read.remaining, used: read.used }, { limit: 2, remaining: i === 0 ? 1 : 0, used: i === 0 ? 1 : 2 }, `answer ${i + 1}`)
      t.ok(read.reset instanceof Date && !Number.isNaN(read.reset.getTime()), 'a reset it can wait for')
    }
    // Honest: the refusal's reset is not before its Retry-After.
    const refused = fields(answers[2]!)
    t.ok(Number(refused['ratelimit-reset'] ?? refused['x-ratelimit-reset'] ?? /reset=(\d+)/.exec(refused.ratelimit!)![1]) >= Number(refused['retry-after']))
  })
}

t.test('draft 7 as its examples write it: a stack says the policy with the least left, and lists every policy', async (t) => {
  const port = await served(t, { rateLimit: TWO_A_MINUTE, headers: { format: 'draft-7' } })
  t.strictSame((await three(port, '/stack')).map(fields), [
    { ratelimit: 'limit=2, remaining=1, reset=30', 'ratelimit-policy': '2;w=60, 5;w=3600' },
    { ratelimit: 'limit=2, remaining=0, reset=60', 'ratelimit-policy': '2;w=60, 5;w=3600' },
    { ratelimit: 'limit=2, remaining=0, reset=30', 'ratelimit-policy': '2;w=60, 5;w=3600', 'retry-after': '30' }
  ])
})

t.test('draft 11, the default, read by structured-headers; a list sends each format, draft 11 keeping RateLimit-Policy', async (t) => {
  const port = await served(t, { rateLimit: TWO_A_MINUTE, headers: { format: ['draft-11', 'draft-6', 'x-ratelimit'] } })
  const [first] = await three(port)
  const f = fields(first!)
  const [item] = parseList(f.ratelimit!) as Item[]
  t.same([item![0], item![1].get('r'), item![1].get('t')], ['default', 1, 30])
  t.same(f, {
    ratelimit: '"default";r=1;t=30',
    'ratelimit-policy': '"default";q=2;w=60',
    'ratelimit-limit': '2',
    'ratelimit-remaining': '1',
    'ratelimit-reset': '30',
    'x-ratelimit-limit': '2',
    'x-ratelimit-remaining': '1',
    'x-ratelimit-reset': '30'
  })
  const plain = await served(t, { rateLimit: TWO_A_MINUTE })
  t.same(fields((await three(plain))[0]!), { ratelimit: '"default";r=1;t=30', 'ratelimit-policy': '"default";q=2;w=60' }, 'the default is draft 11 alone')
  const older = await served(t, { rateLimit: TWO_A_MINUTE, headers: { format: ['draft-6', 'draft-7'] } })
  t.same(fields((await three(older))[0]!)['ratelimit-policy'], '2;w=60', 'drafts 6 and 7 share their RateLimit-Policy')
})

t.test('a cost above 1 is said in RateLimit-Policy, as admission-cost', async (t) => {
  const port = await served(t, { rateLimit: { limit: 10, windowMs: 60_000 }, cost: 2, headers: { format: 'draft-7' } })
  t.same(fields(await get(port, '/')), { ratelimit: 'limit=10, remaining=8, reset=12', 'ratelimit-policy': '10;w=60;admission-cost=2' })
})

t.test("a full gate's 503 carries only Retry-After in the older formats; CORS exposes the names each format sends", async (t) => {
  const go = deferred()
  const origin = { origin: 'https://app.example' }
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(cors)
  await app.register(admission, { rateLimit: TWO_A_MINUTE, maxInFlight: 1, headers: { format: 'x-ratelimit' } })
  app.get('/slow', async () => { await go.promise; return 'late' })
  app.get('/', async () => 'ok')
  const port = await listen(app)
  const slow = get(port, '/slow', origin)
  t.ok(await eventually(() => app.admission.stats().inFlight === 1))
  const shed = await get(port, '/', origin)
  t.equal(shed.status, 503)
  t.same(fields(shed), { 'retry-after': '1' }, 'no quota fields: these formats cannot say the limit is the server\'s concurrency')
  t.equal(shed.headers['access-control-expose-headers'], 'Retry-After, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset')
  go.resolve()
  t.equal((await slow).headers['access-control-expose-headers'], 'Retry-After, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset')
})

/** Memory underneath, deciding by promise only (as a remote backend does); `down.now` makes it fail. */
function byPromise (down: { now: boolean }): RatesBackend {
  const inner = memoryBackend()
  const check = (): void => { if (down.now) throw new Error('down') }
  return {
    kind: 'by-promise',
    limiter: (address, policy) => {
      const limiter = inner.limiter(address, policy)
      return { policy, consume: async (identity, cost) => { check(); return limiter.consume(identity, cost) }, state: (identity) => limiter.state(identity), delete: (identity) => limiter.delete(identity) }
    },
    stack: (address, policies) => {
      const stack = inner.stack!(address, policies)
      return { policies, consume: async (identity, cost) => { check(); return stack.consume(identity, cost) }, check: (identity, cost) => stack.check(identity, cost), state: (identity) => stack.state(identity), delete: (identity) => stack.delete(identity) }
    },
    stop: async () => { await inner.stop() }
  }
}

t.test('decided by promise: the same fields; a backend that cannot decide (onBackendError: allow) sends the policy alone', async (t) => {
  const down = { now: false }
  const port = await served(t, { rateLimit: TWO_A_MINUTE, backend: byPromise(down), onBackendError: 'allow', headers: { format: ['draft-6', 'x-ratelimit'] } })
  for (const path of ['/', '/stack']) {
    t.strictSame((await three(port, path)).map(fields), [
      { 'ratelimit-limit': '2', 'ratelimit-remaining': '1', 'ratelimit-reset': '30', 'ratelimit-policy': path === '/' ? '2;w=60' : '2;w=60, 5;w=3600', 'x-ratelimit-limit': '2', 'x-ratelimit-remaining': '1', 'x-ratelimit-reset': '30' },
      { 'ratelimit-limit': '2', 'ratelimit-remaining': '0', 'ratelimit-reset': '60', 'ratelimit-policy': path === '/' ? '2;w=60' : '2;w=60, 5;w=3600', 'x-ratelimit-limit': '2', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '60' },
      { 'ratelimit-limit': '2', 'ratelimit-remaining': '0', 'ratelimit-reset': '30', 'ratelimit-policy': path === '/' ? '2;w=60' : '2;w=60, 5;w=3600', 'x-ratelimit-limit': '2', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '30', 'retry-after': '30' }
    ], path)
  }
  down.now = true
  for (const path of ['/', '/stack']) {
    const admitted = await get(port, path)
    t.equal(admitted.status, 200)
    t.same(Object.keys(fields(admitted)), ['ratelimit-policy'], `${path}: what remains is not known`)
  }
})

t.test('memory full (onBackendError: allow): the policy alone, on one policy and on a stack', async (t) => {
  const port = await served(t, { rateLimit: TWO_A_MINUTE, backend: memoryBackend({ maxIdentities: 1 }), onBackendError: 'allow', key: (request) => String(request.headers['x-client']), headers: { format: 'draft-7' } })
  for (const path of ['/', '/stack']) {
    t.equal((await get(port, path, { 'x-client': 'a' })).status, 200)
    const other = await get(port, path, { 'x-client': 'b' })
    t.equal(other.status, 200)
    t.same(Object.keys(fields(other)), ['ratelimit-policy'], path)
  }
})

t.test('login throttling: the response that records a failure says what is left after it, in each format', async (t) => {
  const port = await served(t, { rateLimit: false, headers: { format: ['draft-11', 'x-ratelimit'] } }, (app) => {
    app.post('/login', { config: { admission: { rateLimit: { limit: 3, windowMs: 60_000 }, count: 'failures' } } }, async (_request, reply) => reply.code(401).send('no'))
  })
  const failed = await new Promise<Answer>((resolve, reject) => {
    import('node:http').then(({ request }) => {
      const req = request({ host: '127.0.0.1', port, path: '/login', method: 'POST', agent: false }, (res) => { res.resume(); res.on('end', () => { resolve({ status: res.statusCode!, headers: res.headers, body: '' }) }) })
      req.on('error', reject)
      req.end()
    }, reject)
  })
  t.equal(failed.status, 401)
  t.same(fields(failed), { ratelimit: '"default";r=2;t=20', 'ratelimit-policy': '"default";q=3;w=60', 'x-ratelimit-limit': '3', 'x-ratelimit-remaining': '2', 'x-ratelimit-reset': '20' })
  const alone = Fastify()
  t.teardown(() => alone.close())
  await alone.register(admission, { rateLimit: false, headers: { format: 'draft-7' } })
  alone.post('/login', { config: { admission: { rateLimit: { limit: 3, windowMs: 60_000 }, count: 'failures' } } }, async (_request, reply) => reply.code(401).send('no'))
  t.same(fields(await alone.inject({ method: 'POST', url: '/login' }) as unknown as Answer), { ratelimit: 'limit=3, remaining=2, reset=20', 'ratelimit-policy': '3;w=60' }, 'draft 7 alone')
})

t.test('headers.format: an unknown format is refused naming the option and the formats; so are lists that cannot be sent', async (t) => {
  for (const [format, path, part] of [
    ['draft-8', 'headers.format', "one of 'draft-11', 'draft-7', 'draft-6', 'x-ratelimit'"],
    [['draft-6', 'ietf'], 'headers.format[1]', "'x-ratelimit'"],
    [['draft-6', 'draft-6'], 'headers.format[1]', 'a format the list does not name already'],
    [['draft-7', 'draft-11'], 'headers.format', "'draft-7' or 'draft-11', not both"],
    [[], 'headers.format', 'a list names at least one'],
    [7, 'headers.format', "'draft-11'"]
  ] as const) {
    const app = Fastify()
    t.teardown(() => app.close())
    const error = await app.register(admission, { headers: { format: format as never } }).ready().then(() => undefined, (e: unknown) => e) as Error
    t.match(error, { code: 'ADMISSION_INVALID_OPTION', path }, JSON.stringify(format))
    t.match(error.message, part)
  }
  const app = Fastify()
  t.teardown(() => app.close())
  const error = await app.register(admission, { headers: { format: 'x-ratelimit', partitionKey: 'a secret of sixteen or more' } }).ready().then(() => undefined, (e: unknown) => e) as Error
  t.match(error, { code: 'ADMISSION_INVALID_OPTION', path: 'headers.partitionKey' })
  t.notMatch(error.message, 'sixteen', 'the secret is not shown')
})

t.test('the older formats describe the policy with the least left, the later reset among equals; reset is Retry-After on a refusal', async (t) => {
  const { expiringIndex, resetSeconds } = await import('../../lib/gate/headers/header-formats.js')
  t.equal(expiringIndex([10, 100], [5, 50], [0, 0]), 0)
  t.equal(expiringIndex([10, 100], [5, 3], [0, 0]), 1, 'the second has less left')
  t.equal(expiringIndex([10, 100], [3, 3], [1000, 2000]), 1, 'equal: the later reset')
  t.equal(expiringIndex([10, 100], [3, 3], [2000, 1000]), 0)
  t.equal(expiringIndex([10, 100], [-4, 500], [0, 0]), 0, 'clamped into 0..quota, as every field is')
  t.equal(resetSeconds(31_001, 1_000, undefined), 31, 'whole seconds to full, rounded up')
  t.equal(resetSeconds(500, 1_000, undefined), 0, 'already full')
  t.equal(resetSeconds(61_000, 1_000, 7), 7, "a refusal's Retry-After")
})
