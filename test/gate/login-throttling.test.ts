// Login throttling (`count: 'failures'`): only failed responses take from the quota; a request is
// admitted while there is room, taking nothing; a decision once made stays made (no refunds). On
// memory and on Redis alike.
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify'
import admission, { AdmissionOptionError, memoryBackend, type AdmissionRouteOptions, type RatesBackend } from '../../lib/index.js'
import { byPromise, limitBackends, manualClock } from './limits-backends.js'

const BACKENDS = await limitBackends(t)

const THREE = { algorithm: 'fixed-window', limit: 3, windowMs: 60_000 } as const

async function loginApp (t: Test, backend: RatesBackend, route: AdmissionRouteOptions, options: object = {}): Promise<FastifyInstance> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend, rateLimit: false, ...options })
  app.post('/login', { config: { admission: route } }, async (request, reply) => {
    const { user, password } = request.body as { user: string, password: string }
    if (password === 'boom') throw new Error('database down')
    if (password !== 'secret') return reply.code(401).send({ error: 'wrong password' })
    return { user }
  })
  return app
}

const login = async (app: FastifyInstance, password: string, user = 'ann'): Promise<{ status: number, retry: unknown, limit: unknown }> => {
  const r = await app.inject({ method: 'POST', url: '/login', payload: { user, password } })
  return { status: r.statusCode, retry: r.headers['retry-after'], limit: r.headers.ratelimit }
}

// Failures counted at the response are written after it: a Redis round trip may still be on its way.
const settle = async (): Promise<void> => { await new Promise((resolve) => setTimeout(resolve, 20)) }

for (const kind of BACKENDS) {
  t.test(`${kind.name}: successes take nothing; failures fill the quota; the wait is honest`, { skip: kind.skip }, async (t) => {
    const clock = manualClock(1_700_000_040_000)
    const backend = kind.make(t, clock.now)
    const app = await loginApp(t, backend, { rateLimit: THREE, count: 'failures' })
    for (let i = 0; i < 5; i++) t.equal((await login(app, 'secret')).status, 200, 'a success takes nothing')
    t.same(await login(app, 'secret'), { status: 200, retry: undefined, limit: '"default";r=3' }, 'full: no t')
    for (let i = 0; i < 3; i++) {
      t.equal((await login(app, 'wrong')).status, 401)
      await settle()
    }
    // Three failures: the next attempt is refused, even with the right password.
    t.same(await login(app, 'secret'), { status: 429, retry: '60', limit: '"default";r=0;t=60' })
    t.equal((await login(app, 'wrong')).status, 429, 'a refusal is no failure of the route')
    clock.advance(59_999)
    t.equal((await login(app, 'secret')).status, 429)
    clock.advance(1)
    t.equal((await login(app, 'secret')).status, 200, 'back at the full minute, the refusals added nothing')
    t.match(app.admission.stats().routes['POST /login'], { admitted: 10, limited: 3 })
  })

  t.test(`${kind.name}: a success after failures refunds nothing; the registry resets a client`, { skip: kind.skip }, async (t) => {
    const clock = manualClock(1_700_000_040_000)
    const backend = kind.make(t, clock.now)
    const app = await loginApp(t, backend, { rateLimit: THREE, count: 'failures' })
    await login(app, 'wrong')
    await login(app, 'wrong')
    await settle()
    t.equal((await login(app, 'secret')).limit, '"default";r=1;t=60')
    await settle()
    t.equal((await login(app, 'secret')).limit, '"default";r=1;t=60', 'still one left: no refund')
    t.equal(await app.admission.registryOf('POST /login')!.delete('127.0.0.1'), true)
    t.equal((await login(app, 'secret')).limit, '"default";r=3', 'reset: full, no t')
  })
}

t.test('what counts as a failure: a 4xx by default, or the app\'s predicate; errors of the predicate are logged', async (t) => {
  const byDefault = await loginApp(t, memoryBackend({ clock: manualClock().now }), { rateLimit: { algorithm: 'fixed-window', limit: 1, windowMs: 60_000 }, count: 'failures' })
  t.equal((await login(byDefault, 'boom')).status, 500)
  t.equal((await login(byDefault, 'boom')).status, 500, 'a 5xx is the server\'s fault, not a failed attempt')
  t.equal((await login(byDefault, 'wrong')).status, 401)
  t.equal((await login(byDefault, 'secret')).status, 429)

  let calls = 0
  const custom = await loginApp(t, memoryBackend({ clock: manualClock().now }), {
    rateLimit: { algorithm: 'fixed-window', limit: 1, windowMs: 60_000 },
    count: 'failures',
    failed: (_request, reply) => {
      calls++
      if (calls === 1) throw new Error('predicate bug')
      return reply.statusCode >= 500
    }
  })
  t.equal((await login(custom, 'boom')).status, 500, 'the predicate threw: logged, not counted')
  t.equal((await login(custom, 'wrong')).status, 401, 'a 401 is no failure for this predicate')
  t.equal((await login(custom, 'boom')).status, 500)
  t.equal((await login(custom, 'secret')).status, 429)
})

t.test('a failed() that returns a promise (a plain function, not async): logged, nothing counted, its rejection contained', async (t) => {
  const lines: string[] = []
  const app = Fastify({ logger: { level: 'error', stream: { write: (line: string) => { lines.push(line) } } } })
  t.teardown(() => app.close())
  await app.register(admission, { backend: memoryBackend({ clock: manualClock().now }), rateLimit: { algorithm: 'fixed-window', limit: 1, windowMs: 60_000 } })
  const failed = ((): Promise<boolean> => Promise.reject(new Error('looked up too late'))) as unknown as () => boolean
  app.post('/login', { config: { admission: { count: 'failures', failed } } }, async (_request, reply) => await reply.code(401).send('no'))
  for (let i = 0; i < 3; i++) t.equal((await app.inject({ method: 'POST', url: '/login', payload: {} })).statusCode, 401, 'never counted: never refused')
  await new Promise((resolve) => setImmediate(resolve))
  t.ok(lines.some((line) => line.includes('returned a promise, not a boolean')), 'logged')
  t.equal(lines.filter((line) => line.includes('returned a promise')).length, 1, 'once until a failure is counted')
})

t.test('a failure is counted when the key comes from the body, in preHandler', async (t) => {
  const app = await loginApp(t, memoryBackend({ clock: manualClock().now }), { rateLimit: { algorithm: 'fixed-window', limit: 1, windowMs: 60_000 }, count: 'failures', hook: 'preHandler' }, {
    key: (request: FastifyRequest) => `user:${(request.body as { user?: string } | undefined)?.user ?? ''}`
  })
  t.equal((await login(app, 'wrong', 'ann')).status, 401)
  t.equal((await login(app, 'secret', 'ann')).status, 429, "ann's quota is full")
  t.equal((await login(app, 'secret', 'bob')).status, 200, "bob's is not")
})

t.test('a failure the backend cannot record is logged once, and the route goes on', async (t) => {
  const lines: string[] = []
  const app = Fastify({ logger: { level: 'error', stream: { write: (line: string) => { lines.push(line) } } } })
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: false, backend: memoryBackend({ maxIdentities: 1, clock: manualClock().now }) })
  // Both attempts are checked (each new client has room) before either fails: the first failure
  // takes the one slot, the second finds every slot live.
  let entered = 0
  let release!: () => void
  const bothIn = new Promise<void>((resolve) => { release = resolve })
  app.post('/login', { config: { admission: { rateLimit: THREE, count: 'failures' } } }, async (_request, reply) => {
    if (++entered === 2) release()
    await bothIn
    return reply.code(401).send('no')
  })
  const [a, b] = await Promise.all([
    app.inject({ method: 'POST', url: '/login', remoteAddress: '10.0.0.1' }),
    app.inject({ method: 'POST', url: '/login', remoteAddress: '10.0.0.2' })
  ])
  t.same([a.statusCode, b.statusCode], [401, 401])
  t.equal(lines.length, 1)
  t.match(JSON.parse(lines[0]!), { route: 'POST /login', msg: /a failed response of POST \/login was not counted \(every tracked client has live state\)/ })
  // A new client is now refused at the check, as the backend cannot track it (503, onBackendError).
  t.equal((await app.inject({ method: 'POST', url: '/login', remoteAddress: '10.0.0.3' })).statusCode, 503)
})

t.test('count and failed are checked at registration', async (t) => {
  const invalid: Array<[AdmissionRouteOptions | object, object, string, RegExp]> = [
    [{ count: 'errors' }, {}, 'count', /'requests' or 'failures'/],
    [{ failed: () => true }, {}, 'failed', /absent unless count is 'failures'/],
    [{ count: 'failures', failed: async () => true }, {}, 'failed', /a synchronous function/],
    [{ count: 'failures', failed: 1 }, {}, 'failed', /a synchronous function/],
    [{ count: 'failures', rateLimit: false }, {}, 'count', /where there is no rate limit/],
    [{ count: 'failures' }, { rateLimit: { tiers: { a: THREE }, tier: () => 'a' } }, 'count', /with tiers/],
    [{ count: 'failures', groupId: 'g' }, {}, 'count', /with a groupId/]
  ]
  for (const [route, options, key, message] of invalid) {
    const app = Fastify()
    await app.register(admission, options)
    app.post('/login', { config: { admission: route as AdmissionRouteOptions } }, async () => 'ok')
    await t.rejects(async () => { await app.ready() }, { constructor: AdmissionOptionError, path: `config.admission of POST /login.${key}`, message }, key)
    await app.close()
  }
})

for (const kind of BACKENDS) {
  t.test(`${kind.name}: attempts in flight count as failures to come — parallel attempts cannot outnumber the quota`, { skip: kind.skip }, async (t) => {
    const clock = manualClock(1_700_000_040_000)
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(admission, { backend: kind.make(t, clock.now), rateLimit: false })
    let open!: () => void
    let gate = new Promise<void>((resolve) => { open = resolve })
    let entered = 0
    app.post('/login', { config: { admission: { rateLimit: THREE, count: 'failures' } } }, async (request, reply) => {
      entered++
      await gate
      return (request.body as { password: string }).password === 'secret' ? 'yes' : reply.code(401).send('no')
    })
    const attempt = (password: string): Promise<{ statusCode: number, headers: Record<string, unknown> }> =>
      app.inject({ method: 'POST', url: '/login', payload: { password } }) as never
    const until = async (n: number): Promise<void> => { while (entered < n) await new Promise((resolve) => setImmediate(resolve)) }
    // Three in flight fill a quota of three: a fourth is refused, whatever the quota holds.
    const inFlight = [attempt('secret'), attempt('secret'), attempt('secret')]
    await until(3)
    const fourth = await attempt('secret')
    t.equal(fourth.statusCode, 429)
    t.equal(fourth.headers['retry-after'], '1', 'until an attempt ends, at least 1 s')
    t.equal(fourth.headers.ratelimit, '"default";r=3', 'the quota itself is untouched: full, no t')
    open()
    t.same((await Promise.all(inFlight)).map((r) => r.statusCode), [200, 200, 200])
    // They succeeded: nothing was taken, nothing is in flight.
    t.equal((await attempt('secret')).headers.ratelimit, '"default";r=3')

    // One failure recorded, one attempt in flight: room for one more attempt, not two.
    entered = 0
    gate = Promise.resolve()
    t.equal((await attempt('wrong')).statusCode, 401)
    await settle()
    gate = new Promise<void>((resolve) => { open = resolve })
    entered = 0
    const pending = attempt('wrong')
    await until(1)
    const held = attempt('wrong')
    await until(2)
    const refused = await attempt('wrong')
    t.equal(refused.statusCode, 429, 'one failure and two in flight fill three')
    t.equal(refused.headers['retry-after'], '60', 'the quota\'s honest wait, should both in flight fail')
    open()
    t.same([(await pending).statusCode, (await held).statusCode], [401, 401])
    await settle()
    const full = await attempt('secret')
    t.equal(full.statusCode, 429)
    t.equal(full.headers['retry-after'], '60')
  })
}

/**
 * A custom backend whose stacks decide by promise, over memory's (as a remote backend does: no
 * synchronous decisions); its checks reject while `down.now` is true.
 */
const BURST_KINDS = [...BACKENDS, { name: 'custom backend deciding by promise', skip: false as const, make: (_t: Test, clock: () => number) => byPromise(clock) }]
const FIVE = { algorithm: 'fixed-window', limit: 5, windowMs: 15 * 60_000 } as const

/** A login route whose password check waits for `open()`; how many attempts reached it. */
async function heldLogin (t: Test, backend: RatesBackend): Promise<{ app: FastifyInstance, checked: () => number, open: () => void, close: () => void }> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend, rateLimit: false })
  let checked = 0
  let open!: () => void
  let gate = Promise.resolve()
  app.post('/login', { config: { admission: { rateLimit: FIVE, count: 'failures' } } }, async (request, reply) => {
    checked++
    await gate
    return (request.body as { password: string }).password === 'secret' ? 'yes' : reply.code(401).send('no')
  })
  return {
    app,
    checked: () => checked,
    open: () => { open() },
    close: () => { checked = 0; gate = new Promise<void>((resolve) => { open = resolve }) }
  }
}

/** `n` guesses sent at once; resolves once each has reached the password check or been answered without it. */
async function burst (held: Awaited<ReturnType<typeof heldLogin>>, n: number, password: string): Promise<{ answers: Promise<Array<{ status: number, retry: unknown }>>, refused: number }> {
  let answered = 0
  const answers = Promise.all(Array.from({ length: n }, async () => {
    const r = await held.app.inject({ method: 'POST', url: '/login', payload: { password } })
    answered++
    return { status: r.statusCode, retry: r.headers['retry-after'] }
  }))
  // A wait for an event (every guess either at the check or answered), not a bound.
  while (held.checked() + answered < n) await new Promise((resolve) => setImmediate(resolve))
  return { answers, refused: answered }
}

for (const kind of BURST_KINDS) {
  t.test(`${kind.name}: 50 parallel guesses against a quota of 5 — 5 reach the password check, 45 are refused before it`, { skip: kind.skip }, async (t) => {
    const clock = manualClock(1_700_000_100_000)
    const held = await heldLogin(t, kind.make(t, clock.now))
    held.close()
    const wrong = await burst(held, 50, 'wrong')
    t.equal(held.checked(), 5, 'as many guesses reach the password check as the quota holds')
    t.equal(wrong.refused, 45)
    held.open()
    const answers = await wrong.answers
    t.same(answers.filter((a) => a.status === 401).length, 5, 'the five guesses failed')
    t.same(answers.filter((a) => a.status === 429).map((a) => a.retry), Array(45).fill('1'), 'the others: refused until an attempt ends')
    await settle()
    // (`t=` is reckoned on the host's clock, which only the Redis kind sets to the test's.)
    t.match(await login(held.app, 'secret'), { status: 429, retry: '900', limit: /^"default";r=0;/ }, 'five failures fill the quota: the honest wait')
  })

  t.test(`${kind.name}: refused attempts leave nothing in flight — a second burst is let through as far as the first`, { skip: kind.skip }, async (t) => {
    const clock = manualClock(1_700_000_100_000)
    const held = await heldLogin(t, kind.make(t, clock.now))
    for (let round = 1; round <= 2; round++) {
      held.close()
      const right = await burst(held, 50, 'secret')
      t.equal(held.checked(), 5, `round ${round}: five reach the check`)
      held.open()
      t.same((await right.answers).map((a) => a.status).sort(), [...Array(5).fill(200), ...Array(45).fill(429)], `round ${round}: five succeed, nothing taken`)
    }
  })
}

t.test('custom backend deciding by promise: checks that fail leave nothing in flight', async (t) => {
  const down = { now: true }
  const held = await heldLogin(t, byPromise(manualClock().now, down))
  held.close()
  const failed = await burst(held, 50, 'wrong')
  t.equal(held.checked(), 0, 'no check could be made: none reaches the password check (onBackendError: deny)')
  t.same((await failed.answers).map((a) => a.status), Array(50).fill(503))
  down.now = false
  const wrong = await burst(held, 50, 'wrong')
  t.equal(held.checked(), 5, 'the backend back: five reach the check, as on a fresh quota')
  held.open()
  t.equal((await wrong.answers).filter((a) => a.status === 401).length, 5)
})
