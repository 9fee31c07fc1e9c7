// The live page and its data as a browser (or a curl) sees them: one self-contained page whose
// policy forbids any load from elsewhere, a JSON snapshot of the gate's counters, routes that the
// gate neither refuses nor counts, and who may see them (`auth`, or loopback). The page itself in
// a real browser: browser.test.ts.
import t from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import admission from '../../lib/index.js'
import type { AdmissionOptions } from '../../lib/index.js'
import type { LiveSnapshot } from '../../lib/live/snapshot.js'

interface Held { release: () => void }

/** An app with a route `/hold` whose requests wait for the test, and a route `/`, both gated. */
async function appWith (options: AdmissionOptions): Promise<{ app: FastifyInstance, holds: Held[] }> {
  const app = Fastify()
  const holds: Held[] = []
  await app.register(admission, options)
  app.get('/', async () => 'ok')
  app.get('/hold', async () => { await new Promise<void>((resolve) => { holds.push({ release: resolve }) }); return 'held' })
  await app.ready()
  return { app, holds }
}

async function data (app: FastifyInstance, url = '/admission/live/data'): Promise<LiveSnapshot> {
  const res = await app.inject(url)
  if (res.statusCode !== 200) throw new Error(`the data answered ${res.statusCode}`)
  return res.json() as LiveSnapshot
}

t.test('the page: one HTML document, its script and style inline, a policy that forbids loading anything else', async (t) => {
  const { app } = await appWith({ live: true })
  t.teardown(() => app.close())
  const res = await app.inject('/admission/live')
  t.equal(res.statusCode, 200)
  t.equal(res.headers['content-type'], 'text/html; charset=utf-8')
  t.equal(res.headers['cache-control'], 'no-store')
  t.equal(res.headers['x-content-type-options'], 'nosniff')
  const csp = String(res.headers['content-security-policy'])
  t.match(csp, /^default-src 'none'; /, 'nothing loads unless named')
  t.match(csp, /script-src 'sha256-[A-Za-z0-9+/]+=*';/, 'the inline script by its hash, no other')
  t.match(csp, /style-src 'sha256-[A-Za-z0-9+/]+=*';/)
  t.match(csp, /connect-src 'self';/, 'fetch to this origin only')
  t.match(csp, /frame-ancestors 'none'/)
  t.notMatch(csp, /unsafe-inline|unsafe-eval|https?:/)
  t.match(res.body, /^<!doctype html>/)
  t.notMatch(res.body, /\bsrc=|<link(?![^>]*href="data:,")[^>]*href=|@import|url\(/, 'no external asset: no src, no stylesheet link, no CSS import or url()')
  t.notMatch(res.body, /innerHTML|outerHTML|insertAdjacentHTML|document\.write/, 'data is never parsed as HTML')
})

t.test('the data: the counters per route and in total, the limit, its last minute, reasons and offenders when the stats keep them', async (t) => {
  const { app, holds } = await appWith({ maxInFlight: 2, rateLimit: { limit: 2, windowMs: 60_000 }, key: (request) => String(request.headers['x-client']), live: true })
  t.teardown(() => app.close())
  const empty = await data(app)
  t.same(Object.keys(empty).sort(), ['admitted', 'history', 'inFlight', 'limit', 'limited', 'offenders', 'reasons', 'routes', 'shed', 'time', 'unavailable'])
  t.match(empty, { admitted: 0, limited: 0, shed: 0, inFlight: 0, limit: 2 })
  t.equal(empty.history.length, 1, 'a first sample at registration')
  t.match(empty.history[0], { limit: 2, inFlight: 0, time: Number })
  t.ok(Math.abs(empty.time - Date.now()) < 60_000, 'time: ms since the epoch')
  for (let i = 0; i < 3; i++) await app.inject({ url: '/', headers: { 'x-client': 'a' } })
  const first = app.inject({ url: '/hold', headers: { 'x-client': 'b' } })
  const second = app.inject({ url: '/hold', headers: { 'x-client': 'c' } })
  while (holds.length < 2) await new Promise((resolve) => setImmediate(resolve))
  t.equal((await app.inject({ url: '/', headers: { 'x-client': 'd' } })).statusCode, 503, 'the gate is full')
  const full = await data(app)
  t.match(full, { admitted: 4, limited: 1, shed: 1, inFlight: 2, limit: 2 })
  t.match(full.routes['GET /'], { admitted: 2, limited: 1, shed: 1, unavailable: 0, inFlight: 0 })
  t.match(full.routes['GET /hold'], { admitted: 2, inFlight: 2 })
  t.notOk(Object.keys(full.routes).some((name) => name.includes('/admission/live')), 'the live routes are not gated routes: not in the counters')
  t.match(full.reasons, { 'in-flight': 1, 'quota:default': 1 }, 'refusals by reason: which step refused')
  t.match(full.routes['GET /']!.reasons, { 'in-flight': 1, 'quota:default': 1 }, 'per route too')
  const stats = app.admission.stats()
  t.same(full.reasons, stats.reasons, 'reasons as the stats count them')
  t.same(full.offenders, stats.offenders, 'offenders as the stats keep them')
  t.equal(full.offenders!.length, 1, 'the client refused by its quota (a shed request counts for nobody)')
  t.match(full.offenders![0], { key: /^:[A-Za-z0-9+/]+=*:$/, refused: 1 }, 'its key as a digest')
  for (const held of holds) held.release()
  await Promise.all([first, second])
})

t.test('the live routes answer while the gate sheds everything, and their requests are not counted', async (t) => {
  const { app, holds } = await appWith({ maxInFlight: 1, live: true })
  t.teardown(() => app.close())
  const held = app.inject('/hold')
  while (holds.length < 1) await new Promise((resolve) => setImmediate(resolve))
  t.equal((await app.inject('/')).statusCode, 503)
  const before = app.admission.stats()
  t.equal((await app.inject('/admission/live')).statusCode, 200)
  t.equal((await app.inject('/admission/live/data')).statusCode, 200)
  t.equal((await app.inject({ method: 'HEAD', url: '/admission/live' })).statusCode, 200)
  const after = app.admission.stats()
  t.same([after.admitted, after.shed, after.limited], [before.admitted, before.shed, before.limited])
  holds[0]!.release()
  await held
})

t.test('the limit is sampled every second: the history grows to a minute, oldest first', async (t) => {
  const { app } = await appWith({ maxInFlight: { adaptive: true }, live: true })
  t.teardown(() => app.close())
  let snapshot = await data(app)
  // The next sample comes within a second; ask until it has (no assertion on how long it took).
  while (snapshot.history.length < 2) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    snapshot = await data(app)
  }
  t.ok(snapshot.history[0]!.time < snapshot.history[1]!.time, 'oldest first')
  t.type(snapshot.history[1]!.limit, 'number', 'the adaptive limit\'s value')
})

t.test('offenders: raw keys only when the stats were told to keep them; none when they are off', async (t) => {
  const key = (request: { headers: Record<string, unknown> }): string => String(request.headers['x-client'])
  for (const offenders of [undefined, { rawKeys: true }, false] as const) {
    const { app } = await appWith({ rateLimit: { limit: 1, windowMs: 60_000 }, key, offenders, live: true })
    t.teardown(() => app.close())
    for (let i = 0; i < 3; i++) await app.inject({ url: '/', headers: { 'x-client': 'secret-api-key' } })
    const res = await app.inject('/admission/live/data')
    const snapshot = res.json() as LiveSnapshot
    if (offenders === false) {
      t.equal(snapshot.offenders, null, 'offenders: false — none kept, none shown')
    } else if (offenders === undefined) {
      t.match(snapshot.offenders, [{ key: /^:.+:$/, refused: 2 }], 'by default a digest')
      t.notMatch(res.body, /secret-api-key/, 'the raw key nowhere in the data')
    } else {
      t.same(snapshot.offenders, [{ key: 'secret-api-key', refused: 2 }], 'rawKeys: true — the key itself')
    }
  }
})

t.test('without a global in-flight limit: limit null', async (t) => {
  const { app } = await appWith({ live: true })
  t.teardown(() => app.close())
  const snapshot = await data(app)
  t.equal(snapshot.limit, null)
  t.equal(snapshot.history[0]!.limit, null)
})

t.test('auth: its true shows the page; anything else refuses with no data — 403, or the 4xx it set', async (t) => {
  let answer: unknown = true
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, {
    live: {
      auth: async (request, reply) => {
        if (answer === 'basic') reply.code(401).header('www-authenticate', 'Basic realm="admission"')
        if (answer === 'redirect') { await reply.redirect('/login'); return false }
        return answer as boolean
      }
    }
  })
  app.get('/', async () => 'ok')
  for (const url of ['/admission/live', '/admission/live/data']) {
    answer = true
    t.equal((await app.inject(url)).statusCode, 200, `${url}: true`)
    for (const no of [false, undefined, 'yes', 1]) {
      answer = no
      const res = await app.inject(url)
      t.equal(res.statusCode, 403, `${url}: ${String(no)}`)
      t.equal(res.body, '403 Forbidden\n', 'no data')
      t.equal(res.headers['cache-control'], 'no-store')
      t.notOk(res.headers['content-security-policy'])
    }
    answer = 'basic'
    const basic = await app.inject(url)
    t.equal(basic.statusCode, 401, `${url}: the 401 auth set`)
    t.equal(basic.headers['www-authenticate'], 'Basic realm="admission"', 'with its challenge, for a browser\'s login prompt')
    t.equal(basic.body, '401 Unauthorized\n')
    answer = 'redirect'
    const redirected = await app.inject(url)
    t.equal(redirected.statusCode, 302, `${url}: the reply auth sent itself`)
    t.equal(redirected.headers.location, '/login')
  }
})

t.test('auth that throws: the application\'s error, a 500 with no data', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { live: { auth: () => { throw new Error('the session store is down') } } })
  const res = await app.inject('/admission/live/data')
  t.equal(res.statusCode, 500)
  t.notMatch(res.body, /admitted|routes/)
})

t.test('without auth, a request that came in on an address other than loopback is refused (a server started some other way)', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  // As if the socket were on a public address: inject's socket has none.
  app.addHook('onRequest', async (request) => {
    const local = request.headers['x-local-address']
    if (typeof local === 'string') Object.defineProperty(request.raw.socket, 'localAddress', { value: local, configurable: true })
  })
  await app.register(admission, { live: true })
  for (const url of ['/admission/live', '/admission/live/data']) {
    t.equal((await app.inject({ url, headers: { 'x-local-address': '192.0.2.10' } })).statusCode, 403, `${url}: a public address`)
    t.equal((await app.inject({ url, headers: { 'x-local-address': '127.0.0.1' } })).statusCode, 200, `${url}: loopback`)
    t.equal((await app.inject({ url })).statusCode, 200, `${url}: inject, from the process itself`)
  }
})

t.test('the data, polled every second by each open page, is not in the request log; the page is', async (t) => {
  const lines: Array<{ msg?: string, req?: { url?: string } }> = []
  const stream = { write: (line: string) => { lines.push(JSON.parse(line) as { msg?: string }) } }
  const app = Fastify({ logger: { level: 'info', stream } })
  t.teardown(() => app.close())
  await app.register(admission, { live: true })
  await app.inject('/admission/live/data')
  t.same(lines.filter((line) => line.msg === 'incoming request'), [], 'no line for the data')
  await app.inject('/admission/live')
  t.equal(lines.filter((line) => line.msg === 'incoming request' && line.req?.url === '/admission/live').length, 1, 'the page\'s request is logged')
})
