// The RateLimit fields as draft-ietf-httpapi-ratelimit-headers-11 defines them, as a client that
// plans from them sees them: `t` is the seconds until more quota comes (not until all of it),
// `Retry-After` is never earlier than a refusing policy's `t`, the problem body names the policies
// that refused, login throttling's response says what is left after its failure, the in-flight
// limit is a `concurrent-requests` quota on its 503s. On memory and on Redis alike.
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import { parseList, type Item } from 'structured-headers'
import admission, { type AdmissionOptions, type RatesBackend } from '../../lib/index.js'
import { byPromise, limitBackends, manualClock } from './limits-backends.js'

const BACKENDS = await limitBackends(t)

async function appOn (t: Test, backend: RatesBackend, options: AdmissionOptions, routes: (app: FastifyInstance) => void = (app) => { app.get('/', async () => 'ok') }): Promise<FastifyInstance> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend, ...options })
  routes(app)
  await app.ready()
  return app
}

/** `RateLimit` parsed back (RFC 9651, an independent parser): each item's name and its r and t. */
function fields (value: unknown): Array<{ name: string, r: unknown, t: unknown }> {
  return parseList(String(value)).map((member) => { const item = member as Item; return { name: String(item[0]), r: item[1].get('r'), t: item[1].get('t') } })
}

for (const kind of BACKENDS) {
  t.test(`${kind.name}: t is the seconds until one more unit, for each algorithm; absent at full capacity`, { skip: kind.skip }, async (t) => {
    const clock = manualClock(1_800_000_000_000)
    const backend = kind.make(t, clock.now)
    const app = await appOn(t, backend, { rateLimit: false, key: (r) => String(r.headers['x-client']) }, (app) => {
      const route = (url: string, rateLimit: object, cost = 1): void => { app.get(url, { config: { admission: { rateLimit, cost } } }, async () => 'ok') }
      route('/bucket', { algorithm: 'token-bucket', limit: 10, windowMs: 60_000 })
      route('/gcra', { algorithm: 'gcra', limit: 10, windowMs: 60_000 })
      route('/window', { algorithm: 'fixed-window', limit: 3, windowMs: 60_000 })
      route('/sliding', { algorithm: 'sliding-window-counter', limit: 4, windowMs: 60_000 })
      route('/heavy', { algorithm: 'token-bucket', limit: 10, windowMs: 60_000 }, 2)
    })
    const get = async (url: string): Promise<{ status: number, retry: unknown, limit: unknown, policy: unknown }> => {
      const res = await app.inject({ url, headers: { 'x-client': 'c' } })
      return { status: res.statusCode, retry: res.headers['retry-after'], limit: res.headers.ratelimit, policy: res.headers['ratelimit-policy'] }
    }
    // 10 a minute: a token every 6 s; the bucket is full again in 6 s, not a minute (draft 10's "until full" said 6 too — one token).
    t.same((await get('/bucket')).limit, '"default";r=9;t=6')
    clock.advance(1_000)
    t.same((await get('/bucket')).limit, '"default";r=8;t=5', 'the next token 5 s away, not the 12 s until full')
    t.same((await get('/gcra')).limit, '"default";r=9;t=6')
    // A fixed window gives everything back at its end: t is the window's end.
    clock.advance(19_000)
    t.same((await get('/window')).limit, '"default";r=2;t=40', 'the window ends 40 s from now')
    // A sliding window: this window's count comes back as it slides out of the next one; the
    // previous window's, as it decays in this one.
    t.same((await get('/sliding')).limit, '"default";r=3;t=100', 'one request: its unit is back only once it has slid out of the next window')
    t.same((await get('/sliding')).limit, '"default";r=2;t=70', 'two: half of them have slid out 30 s into the next window')
    clock.advance(40_000)
    t.same((await get('/sliding')).limit, '"default";r=1;t=30', 'next window: the previous two decay, one unit back in 30 s (full only in 120 s)')
    for (let i = 0; i < 10; i++) await get('/bucket')
    const refused = await get('/bucket')
    t.equal(refused.status, 429)
    t.same(fields(refused.limit), [{ name: 'default', r: 0, t: Number(refused.retry) }], 'cost 1: Retry-After is exactly t')
    // Cost 2: r counts cost units, and the policy says a request here takes two of them.
    const heavy = await get('/heavy')
    t.same([heavy.limit, heavy.policy], ['"default";r=8;t=6', '"default";q=10;w=60;admission-cost=2'])
  })
}

for (const kind of BACKENDS) {
  t.test(`${kind.name}: a refusal's problem body names the policies that refused, as RateLimit-Policy names them`, { skip: kind.skip }, async (t) => {
    const clock = manualClock(1_800_000_000_000)
    const app = await appOn(t, kind.make(t, clock.now), { rateLimit: false, refusal: 'problem', key: (r) => String(r.headers['x-client']) }, (app) => {
      app.get('/stack', {
        config: {
          admission: {
            rateLimit: [
              { name: 'burst', algorithm: 'fixed-window', limit: 5, windowMs: 1_000 },
              { name: 'daily', algorithm: 'fixed-window', limit: 2, windowMs: 86_400_000 }
            ]
          }
        }
      }, async () => 'ok')
      app.get('/tiers', {
        config: {
          admission: {
            rateLimit: {
              tiers: { free: { algorithm: 'fixed-window', limit: 1, windowMs: 60_000 }, pro: { algorithm: 'fixed-window', limit: 100, windowMs: 60_000 } },
              tier: (request) => request.headers['x-tier'] === 'pro' ? 'pro' : 'free'
            }
          }
        }
      }, async () => 'ok')
    })
    const get = async (url: string, tier = 'free'): Promise<{ status: number, body: { 'violated-policies'?: string[], type?: string }, limit: unknown, retry: unknown }> => {
      const res = await app.inject({ url, headers: { 'x-client': 'c', 'x-tier': tier } })
      return { status: res.statusCode, body: res.statusCode === 200 ? {} : res.json(), limit: res.headers.ratelimit, retry: res.headers['retry-after'] }
    }
    await get('/stack')
    await get('/stack')
    const daily = await get('/stack')
    t.equal(daily.status, 429)
    t.same(daily.body['violated-policies'], ['daily'], 'the daily quota is exhausted, the burst one is not')
    t.match(daily.body.type, /#quota-exceeded$/)
    t.same((await get('/tiers', 'pro')).status, 200)
    const items = fields(daily.limit)
    t.same(items.map((i) => [i.name, i.r]), [['burst', 3], ['daily', 0]])
    t.ok(Number(daily.retry) >= Number(items[1]!.t), 'Retry-After is not earlier than the refusing policy\'s t')
    await get('/tiers')
    const free = await get('/tiers')
    t.same([free.status, free.body['violated-policies']], [429, ['free']], 'the tier\'s name, as its headers name it')
  })

  t.test(`${kind.name}: login throttling: the response that records a failure carries the r after it`, { skip: kind.skip }, async (t) => {
    const clock = manualClock(1_800_000_000_000)
    const app = await appOn(t, kind.make(t, clock.now), { rateLimit: false }, (app) => {
      app.post('/login', { config: { admission: { count: 'failures', rateLimit: { algorithm: 'fixed-window', limit: 5, windowMs: 60_000 } } } }, async (request, reply) => {
        return (request.body as { password: string }).password === 'secret' ? 'welcome' : reply.code(401).send('wrong')
      })
    })
    const attempt = async (password: string): Promise<[number, unknown]> => {
      const res = await app.inject({ method: 'POST', url: '/login', payload: { password } })
      return [res.statusCode, res.headers.ratelimit]
    }
    t.same(await attempt('secret'), [200, '"default";r=5'], 'a success takes nothing: the quota is full, no t')
    const seen = []
    for (let i = 0; i < 5; i++) seen.push(await attempt('guess'))
    t.same(seen, [1, 2, 3, 4, 5].map((k) => [401, `"default";r=${5 - k};t=60`]), 'each failure says what is left after it')
    const sixth = await attempt('guess')
    t.equal(sixth[0], 429, 'r=0 said so: the sixth is refused')
  })
}

t.test('a full in-flight gate answers with its policy: q concurrent requests, none left, named in the problem body', async (t) => {
  let release: () => void = () => {}
  const held = new Promise<void>((resolve) => { release = resolve })
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { maxInFlight: 1, rateLimit: false, refusal: 'problem' })
  app.get('/slow', async () => { await held; return 'done' })
  app.get('/own', { config: { admission: { maxInFlight: 1 } } }, async () => { await held; return 'done' })
  await app.ready()
  const first = app.inject('/slow')
  await new Promise((resolve) => setImmediate(resolve))
  const shed = await app.inject('/slow')
  t.equal(shed.statusCode, 503)
  t.same([shed.headers['ratelimit-policy'], shed.headers.ratelimit], ['"in-flight";q=1;qu="concurrent-requests"', '"in-flight";r=0'])
  t.same(parseList(String(shed.headers['ratelimit-policy']))[0]![1].get('qu'), 'concurrent-requests', 'a String, as the draft asks')
  t.same(shed.json()['violated-policies'], ['in-flight'])
  t.match(shed.json().type, /#temporary-reduced-capacity$/)
  release()
  t.equal((await first).statusCode, 200)
  t.equal((await app.inject('/slow')).headers['ratelimit-policy'], undefined, 'an admitted response does not advertise it')
})

t.test("a route's own full in-flight limit is named route-in-flight, with its own q; headers: false sends neither field", async (t) => {
  for (const headers of [true, false]) {
    let release: () => void = () => {}
    const held = new Promise<void>((resolve) => { release = resolve })
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(admission, { maxInFlight: 10, rateLimit: false, refusal: 'problem', headers })
    app.get('/own', { config: { admission: { maxInFlight: 1 } } }, async () => { await held; return 'done' })
    await app.ready()
    const first = app.inject('/own')
    await new Promise((resolve) => setImmediate(resolve))
    const shed = await app.inject('/own')
    t.equal(shed.statusCode, 503)
    t.same(shed.json()['violated-policies'], ['route-in-flight'])
    t.same([shed.headers['ratelimit-policy'], shed.headers.ratelimit], headers ? ['"route-in-flight";q=1;qu="concurrent-requests"', '"route-in-flight";r=0'] : [undefined, undefined])
    release()
    await first
  }
})

t.test('headers: { partitionKey }: pk is a digest of the client key, never the key; the same under one secret, on every item', async (t) => {
  const make = async (partitionKey: true | string): Promise<FastifyInstance> => {
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(admission, { headers: { partitionKey }, key: (r) => String(r.headers['x-client']), rateLimit: { algorithm: 'fixed-window', limit: 5, windowMs: 60_000 } })
    app.get('/', async () => 'ok')
    app.get('/stack', { config: { admission: { rateLimit: [{ name: 'a', algorithm: 'fixed-window', limit: 5, windowMs: 1_000 }, { name: 'b', algorithm: 'fixed-window', limit: 9, windowMs: 60_000 }] } } }, async () => 'ok')
    return app
  }
  // Each item's pk, in hex (a Byte Sequence parses to an ArrayBuffer).
  const pkOf = async (app: FastifyInstance, client: string, url = '/'): Promise<string[]> => {
    const res = await app.inject({ url, headers: { 'x-client': client } })
    return parseList(String(res.headers.ratelimit)).map((member) => {
      const pk = (member as Item)[1].get('pk')
      return pk instanceof ArrayBuffer ? Buffer.from(pk).toString('hex') : String(pk)
    })
  }
  const shared = 'a secret the fleet shares, 32+ chars'
  const one = await make(shared)
  const two = await make(shared)
  const [ann] = await pkOf(one, 'ann')
  t.match(ann, /^[0-9a-f]{32}$/, 'a Byte Sequence of 16 bytes')
  t.same(await pkOf(two, 'ann'), [ann], 'another registration under the same secret agrees')
  t.notSame(await pkOf(one, 'bob'), [ann], 'another client, another partition')
  t.notOk(Buffer.from(ann!, 'hex').toString('latin1').includes('ann'), 'not the key itself')
  const stacked = await pkOf(one, 'ann', '/stack')
  t.equal(stacked.length, 2)
  t.same(stacked[0], stacked[1], 'on each item of a stack')
  t.notSame(await pkOf(await make(true), 'ann'), [ann], 'true: a secret of its own, drawn at registration')
})

t.test('headers: bad values are refused at registration, naming the option', async (t) => {
  for (const [headers, path] of [['yes', 'headers'], [{ partitionKey: 'short' }, 'headers.partitionKey'], [{ partitionKey: 1 }, 'headers.partitionKey'], [{ pk: true }, 'headers.pk'], [{}, 'headers.format']] as const) {
    const app = Fastify()
    t.teardown(() => app.close())
    const error = await app.register(admission, { headers: headers as never }).ready().then(() => undefined, (e: unknown) => e)
    t.match(error, { code: 'ADMISSION_INVALID_OPTION', path }, JSON.stringify(headers))
  }
  // A rejected secret is shown by its length, never its text (in the message or on the error).
  const leaky = Fastify()
  t.teardown(() => leaky.close())
  const secret = 'hunter2-secret'
  const error = await leaky.register(admission, { headers: { partitionKey: secret } }).ready().then(() => undefined, (e: unknown) => e) as Error & { value: unknown }
  t.match(error.message, /got a string of 14 characters \(not shown: a secret\)/)
  t.notMatch(`${error.message} ${String(error.value)} ${JSON.stringify(error)}`, secret, 'the secret appears nowhere')
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { headers: { partitionKey: false as never } })
  app.get('/', async () => 'ok')
  t.notMatch((await app.inject('/')).headers.ratelimit, /pk=/, 'partitionKey: false sends the fields without pk')
})

// With a custom backend deciding by promise too, so that the remote path is tried without Redis.
for (const kind of [...BACKENDS, { name: 'custom backend deciding by promise', skip: false as const, make: (t: Test, clock: () => number) => {
  // A remote decision's t is read against this process's clock: here, the test's.
  const host = Date.now
  Date.now = clock
  t.teardown(() => { Date.now = host })
  return byPromise(clock)
} }]) {
  t.test(`${kind.name}: login throttling's failure fields: off with headers: false, with pk when asked, also on a route declared before the plugin`, { skip: kind.skip }, async (t) => {
    const clock = manualClock(1_800_000_000_000)
    const LOGIN = { count: 'failures', rateLimit: { algorithm: 'fixed-window', limit: 3, windowMs: 60_000 } } as const
    const wrong = async (_request: unknown, reply: { code: (n: number) => { send: (s: string) => unknown } }): Promise<unknown> => reply.code(401).send('wrong')
    const off = await appOn(t, kind.make(t, clock.now), { rateLimit: false, headers: false }, (app) => { app.post('/login', { config: { admission: LOGIN } }, wrong) })
    const quiet = await off.inject({ method: 'POST', url: '/login' })
    t.same([quiet.statusCode, quiet.headers.ratelimit], [401, undefined], 'headers: false: no field on the failure either')

    const early = Fastify()
    t.teardown(() => early.close())
    early.post('/login', { config: { admission: LOGIN } }, wrong)
    await early.register(admission, { backend: kind.make(t, clock.now), rateLimit: false, headers: { partitionKey: 'a secret of sixteen or more' } })
    await early.ready()
    // Declared after the plugin: the failure's own response says what is left after it, with its pk.
    const seen = await appOn(t, kind.make(t, clock.now), { rateLimit: false, headers: { partitionKey: 'a secret of sixteen or more' } }, (app) => { app.post('/login', { config: { admission: LOGIN } }, wrong) })
    const [told] = parseList(String((await seen.inject({ method: 'POST', url: '/login' })).headers.ratelimit)) as Item[]
    t.same([told![1].get('r'), told![1].get('pk') instanceof ArrayBuffer], [2, true], 'declared after the plugin: the r after the failure, with its pk')

    // Such a route has no hooks of its own (no onSend): its failure is counted once its response
    // is written, so that response says what was left before it, and the next one what is left after.
    const failed = await early.inject({ method: 'POST', url: '/login' })
    const [item] = parseList(String(failed.headers.ratelimit)) as Item[]
    t.same([failed.statusCode, item![0], item![1].get('r'), item![1].get('t'), item![1].get('pk') instanceof ArrayBuffer], [401, 'default', 3, undefined, true],
      'declared before the plugin: the r before the failure (the quota full: no t), with its pk')
    await new Promise((resolve) => setImmediate(resolve))
    const next = await early.inject({ method: 'POST', url: '/login' })
    const [after] = parseList(String(next.headers.ratelimit)) as Item[]
    t.same([next.statusCode, after![1].get('r')], [401, 2], 'the next response: the r after the first failure')
  })
}
