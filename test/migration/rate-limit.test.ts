import t, { type Test } from 'tap'
import { readFileSync } from 'node:fs'
import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify'
import type { Redis } from 'ioredis'
import rateLimit, { normalizeIP as theirNormalizeIP } from '@fastify/rate-limit'
import admission, { AdmissionOptionError, DECISION_CHANNEL, memoryBackend, normalizeIP, RatesInvalidArgumentError, redisBackend } from '../../lib/index.js'
import type { AdmissionDecisionEvent, AdmissionOptions, RatesBackend } from '../../lib/index.js'
import { deleteKeys, sharedRedis, uniquePrefix } from '../backends/redis/helpers.js'

// The table of docs/migration/rate-limit.md ("Coming from @fastify/rate-limit"), a test per row:
// every row must have one here, and every test here a row. A row with no equivalent checks that
// @fastify/rate-limit's option is refused at registration with an AdmissionOptionError naming it —
// never ignored.

const PAGE = 'docs/migration/rate-limit.md'

function tableRows (): string[] {
  const page = readFileSync(PAGE, 'utf8')
  const at = page.indexOf('\n| @fastify/rate-limit |')
  if (at === -1) throw new Error(`${PAGE} has no table headed "| @fastify/rate-limit |"`)
  const table = page.slice(at + 1)
  const lines = table.split('\n')
  const end = lines.findIndex((line) => !line.startsWith('|'))
  return lines.slice(2, end).map((line) => line.split('|')[1]!.trim())
}

declare module 'fastify' {
  interface FastifyRequest { migrationUser?: string }
}

/** A settable clock for the memory backend. */
function clockAt (start: number): { now: () => number, set: (ms: number) => void, advance: (ms: number) => void } {
  let now = start
  return { now: () => now, set: (ms) => { now = ms }, advance: (ms) => { now += ms } }
}

async function appWith (options: AdmissionOptions, routes: (app: FastifyInstance) => void = (app) => { app.get('/', async () => 'ok') }): Promise<FastifyInstance> {
  const app = Fastify()
  await app.register(admission, options)
  routes(app)
  await app.ready()
  return app
}

/** @fastify/rate-limit's option `name`, given to this plugin, is refused naming it. */
async function refuses (t: Test, options: Record<string, unknown>, name: string): Promise<void> {
  const app = Fastify()
  t.teardown(() => app.close())
  const error = await app.register(admission, options as AdmissionOptions).ready().then(() => undefined, (e: unknown) => e)
  t.type(error, AdmissionOptionError, `${name} is refused`)
  t.equal((error as AdmissionOptionError).code, 'ADMISSION_INVALID_OPTION')
  t.match((error as Error).message, `\`options.${name}\``, `the error names ${name}`)
  t.match((error as Error).message, 'unknown option')
}

async function statuses (app: FastifyInstance, n: number, url = '/', headers: Record<string, string> = {}): Promise<number[]> {
  const out: number[] = []
  for (let i = 0; i < n; i++) out.push((await app.inject({ url, headers })).statusCode)
  return out
}

const ROWS: Record<string, (t: Test) => Promise<void>> = {
  '`max`, `timeWindow`': async (t) => {
    await refuses(t, { max: 3 }, 'max')
    await refuses(t, { timeWindow: '1 minute' }, 'timeWindow')

    // The default, a token bucket: 3 at once, then one back every 1000 / 3 ms — not a whole window.
    const bucketClock = clockAt(10_000)
    const bucket = await appWith({ rateLimit: { limit: 3, windowMs: 1_000 }, backend: memoryBackend({ clock: bucketClock.now }) })
    t.teardown(() => bucket.close())
    t.same(await statuses(bucket, 4), [200, 200, 200, 429])
    bucketClock.advance(334)
    t.same(await statuses(bucket, 2), [200, 429], 'a token back after windowMs / limit')

    // `max` as a function of the request: tiers declared at registration, one picked per request.
    const tiered = await appWith({
      rateLimit: { tiers: { anonymous: { limit: 1, windowMs: 60_000 }, keyed: { limit: 3, windowMs: 60_000 } }, tier: (request) => request.headers['x-api-key'] === undefined ? 'anonymous' : 'keyed' },
      backend: memoryBackend({ clock: clockAt(15_000).now })
    })
    t.teardown(() => tiered.close())
    t.same(await statuses(tiered, 2), [200, 429], 'max 1 without a key')
    t.same(await statuses(tiered, 4, '/', { 'x-api-key': 'k' }), [200, 200, 200, 429], 'max 3 with one')

    // fixed-window: @fastify/rate-limit's contract — `limit` per window, nothing until the next one.
    const windowClock = clockAt(20_000)
    const fixed = await appWith({ rateLimit: { algorithm: 'fixed-window', limit: 3, windowMs: 1_000 }, backend: memoryBackend({ clock: windowClock.now }) })
    t.teardown(() => fixed.close())
    t.same(await statuses(fixed, 4), [200, 200, 200, 429])
    windowClock.advance(334)
    t.same(await statuses(fixed, 1), [429], 'still refused in the same window')
    windowClock.set(20_999)
    const last = await fixed.inject('/')
    t.equal(last.statusCode, 429)
    t.equal(last.headers['retry-after'], '1')
    windowClock.set(21_000)
    t.same(await statuses(fixed, 4), [200, 200, 200, 429], 'the next window: limit again')
    // The window is aligned on the clock, not started at the client's first request: a client
    // first seen at 22 900 has a fresh window at 23 000 (@fastify/rate-limit: at 23 900).
    windowClock.set(22_900)
    t.same(await statuses(fixed, 4), [200, 200, 200, 429])
    windowClock.set(23_000)
    t.same(await statuses(fixed, 1), [200], 'aligned: a fresh window 100 ms later')

    // Same defaults: 1000 per 60 s.
    const defaults = await appWith({})
    t.teardown(() => defaults.close())
    t.equal((await defaults.inject('/')).headers['ratelimit-policy'], '"default";q=1000;w=60')
    // A route's partial policy takes the plugin's fields: its own limit, the plugin's window.
    const partial = await appWith({ rateLimit: { limit: 100, windowMs: 60_000 } }, (app) => {
      app.get('/', { config: { admission: { rateLimit: { limit: 6 } } } }, async () => 'ok')
    })
    t.teardown(() => partial.close())
    t.equal((await partial.inject('/')).headers['ratelimit-policy'], '"default";q=6;w=60', '6 per 60 000 ms')
    t.same(await statuses(partial, 6), [200, 200, 200, 200, 200, 429])
    // A field left out takes the default, as `max` alone (or `timeWindow` alone) does there.
    const theirs = Fastify()
    t.teardown(() => theirs.close())
    await theirs.register(rateLimit, { max: 100 })
    theirs.get('/', async () => 'ok')
    const peer = await theirs.inject('/')
    t.same([peer.headers['x-ratelimit-limit'], peer.headers['x-ratelimit-reset']], ['100', '60'], "the peer's max alone: 100 a minute")
    const limitAlone = await appWith({ rateLimit: { limit: 100 } })
    t.teardown(() => limitAlone.close())
    t.equal((await limitAlone.inject('/')).headers['ratelimit-policy'], '"default";q=100;w=60', 'limit alone: 100 per 60 000 ms')
    const windowAlone = await appWith({ rateLimit: { algorithm: 'fixed-window', windowMs: 1_000 } })
    t.teardown(() => windowAlone.close())
    t.equal((await windowAlone.inject('/')).headers['ratelimit-policy'], '"default";q=1000;w=1', 'windowMs alone: 1000 per window')
    // Under `rateLimit: false` (`global: false`) a route's partial policy takes the defaults too.
    const unlimited = await appWith({ rateLimit: false }, (app) => {
      app.get('/', { config: { admission: { rateLimit: { limit: 6 } } } }, async () => 'ok')
    })
    t.teardown(() => unlimited.close())
    t.equal((await unlimited.inject('/')).headers['ratelimit-policy'], '"default";q=6;w=60', "a route's max under global: false: the default minute")
    // A route takes the plugin's penalty too (as a route there takes `continueExceeding`), even with
    // a policy of its own; `penalty: false` drops it.
    let now = 3_000_000
    const penalized = await appWith({ rateLimit: { algorithm: 'fixed-window', limit: 1, windowMs: 1_000, penalty: 'double' }, backend: memoryBackend({ clock: () => now }) }, (app) => {
      app.get('/own', { config: { admission: { rateLimit: { algorithm: 'fixed-window', limit: 1, windowMs: 1_000 } } } }, async () => 'ok')
      app.get('/mild', { config: { admission: { rateLimit: { penalty: false } } } }, async () => 'ok')
    })
    t.teardown(() => penalized.close())
    const waits = async (url: string): Promise<string[]> => {
      const out: string[] = []
      for (let i = 0; i < 4; i++) {
        now += 1
        out.push(String((await penalized.inject(url)).headers['retry-after']))
      }
      return out
    }
    t.same(await waits('/own'), ['undefined', '1', '2', '4'], "a route's complete policy takes the plugin's penalty")
    t.same(await waits('/mild'), ['undefined', '1', '1', '1'], 'penalty: false: none')
  },

  '`keyGenerator`': async (t) => {
    await refuses(t, { keyGenerator: () => 'k' }, 'keyGenerator')
    const app = await appWith({ rateLimit: { limit: 1, windowMs: 60_000 }, key: (request) => String(request.headers['x-api-key']) })
    t.teardown(() => app.close())
    t.same(await statuses(app, 2, '/', { 'x-api-key': 'a' }), [200, 429])
    t.same(await statuses(app, 1, '/', { 'x-api-key': 'b' }), [200], 'another key, another quota')
    // Synchronous only.
    const async = Fastify()
    t.teardown(() => async.close())
    await t.rejects(async () => { await async.register(admission, { key: (async () => 'k') as unknown as () => string }).ready() }, AdmissionOptionError)
  },

  '`allowList`': async (t) => {
    const app = await appWith({ rateLimit: { limit: 1, windowMs: 60_000 }, allowList: ['127.0.0.1'] })
    t.teardown(() => app.close())
    const responses = await Promise.all([app.inject('/'), app.inject('/'), app.inject('/')])
    t.same(responses.map((r) => r.statusCode), [200, 200, 200], 'inject comes from 127.0.0.1: on the list')
    t.equal(responses[0]!.headers.ratelimit, undefined, 'no headers for an allowed client')
    t.equal(app.admission.stats().allowed, 3)
    const other = await appWith({ rateLimit: { limit: 1, windowMs: 60_000 }, allowList: (_request, key) => key === '10.0.0.1' })
    t.teardown(() => other.close())
    t.same(await statuses(other, 2), [200, 429], 'a function, with the key')
  },

  '`groupId`': async (t) => {
    const app = await appWith({ rateLimit: false }, (app) => {
      const group = { groupId: 'search', rateLimit: { limit: 2, windowMs: 60_000 } }
      app.get('/search', { config: { admission: group } }, async () => 'ok')
      app.get('/suggest', { config: { admission: group } }, async () => 'ok')
      app.get('/other', { config: { admission: { rateLimit: { limit: 2, windowMs: 60_000 } } } }, async () => 'ok')
    })
    t.teardown(() => app.close())
    t.same([...await statuses(app, 1, '/search'), ...await statuses(app, 2, '/suggest')], [200, 200, 429], 'one quota for the group')
    t.same(await statuses(app, 1, '/other'), [200], 'a route outside the group keeps its own')
  },

  '`errorResponseBuilder`': async (t) => {
    const app = await appWith({
      rateLimit: { limit: 1, windowMs: 60_000 },
      errorResponseBuilder: (_request, context) => ({ statusCode: context.statusCode, error: 'Too Many Requests', message: `Retry in ${context.after}`, max: context.max, ttl: context.ttl })
    })
    t.teardown(() => app.close())
    await app.inject('/')
    const refused = await app.inject('/')
    t.equal(refused.statusCode, 429)
    t.equal(refused.headers['retry-after'], '60')
    // `after` counts seconds; @fastify/rate-limit's rounds to its largest unit ('1 minute').
    t.same(refused.json(), { statusCode: 429, error: 'Too Many Requests', message: 'Retry in 60 seconds', max: 1, ttl: 60_000 })
    // Called for 503s too: the guide's builder labels by the status.
    let release = (): void => {}
    let entered = (): void => {}
    const held = new Promise<void>((resolve) => { release = resolve })
    const inside = new Promise<void>((resolve) => { entered = resolve })
    const full = await appWith({
      maxInFlight: 1,
      errorResponseBuilder: (_request, context) => ({ statusCode: context.statusCode, error: context.statusCode === 429 ? 'Too Many Requests' : 'Service Unavailable', message: `Retry in ${context.after}` })
    }, (app) => { app.get('/', async () => { entered(); await held; return 'ok' }) })
    t.teardown(() => full.close())
    const first = full.inject('/').then((response) => response)
    await inside
    const shed = await full.inject('/')
    release()
    t.equal((await first).statusCode, 200)
    t.equal(shed.statusCode, 503)
    t.same(shed.json(), { statusCode: 503, error: 'Service Unavailable', message: 'Retry in 1 second' })
  },

  'the 429 through `setErrorHandler`': async (t) => {
    const app = Fastify()
    t.teardown(() => app.close())
    // The application shapes every error in one handler, the 429 among them.
    app.setErrorHandler((error, _request, reply) => reply.code((error as { statusCode?: number }).statusCode ?? 500).send({ shaped: (error as { code?: string }).code }))
    await app.register(admission, { rateLimit: { limit: 1, windowMs: 60_000 }, refusal: 'error' })
    app.get('/', async () => 'ok')
    await app.inject('/')
    const refused = await app.inject('/')
    t.equal(refused.statusCode, 429)
    t.same(refused.json(), { shaped: 'ADMISSION_LIMITED' })
    t.equal(refused.headers['retry-after'], '60')
    // The status is the error's until the handler had its say: a redirect there is a 302 (as the
    // peer's, its issue 284); a body sent with no status of the handler's goes out as a 429 (the
    // peer's would be a 200: a refusal never reads as a success here).
    for (const [answer, status] of [[(reply: FastifyReply) => reply.redirect('/slow-down'), 302], [(reply: FastifyReply) => reply.send({ slow: 'down' }), 429]] as const) {
      const handled = await appWith({ rateLimit: { limit: 1, windowMs: 60_000 }, refusal: 'error' }, (app) => {
        app.setErrorHandler((_error, _request, reply) => answer(reply))
        app.get('/', async () => 'ok')
      })
      t.teardown(() => handled.close())
      await handled.inject('/')
      t.equal((await handled.inject('/')).statusCode, status)
    }
    // Without refusal: 'error' the built-in body is sent and the handler never sees it.
    let handled = 0
    const direct = await appWith({ rateLimit: { limit: 1, windowMs: 60_000 } }, (app) => {
      app.setErrorHandler((error, _request, reply) => { handled++; return reply.send(error) })
      app.get('/', async () => 'ok')
    })
    t.teardown(() => direct.close())
    await direct.inject('/')
    t.equal((await direct.inject('/')).json().error, 'Too Many Requests')
    t.equal(handled, 0, 'the handler never saw it')
  },

  '`fastify.createRateLimit(opts)`, `{ increment: false }`': async (t) => {
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(admission, { rateLimit: false })
    const exports = app.rates.use('exports', [{ algorithm: 'fixed-window', limit: 2, windowMs: 60_000 }])
    app.post('/export', async (request, reply) => {
      const d = await exports.consume(String(request.headers['x-user']))
      if (d.denied) return reply.code(429).header('retry-after', Math.ceil(d.retryAfterMs / 1000)).send({ retryAfterMs: d.retryAfterMs })
      return { remaining: d.remaining }
    })
    app.get('/export/quota', async (request) => {
      const d = await exports.check(String(request.headers['x-user']))
      return { allowed: d.allowed, remaining: d.remaining }
    })
    const as = (user: string): { headers: Record<string, string> } => ({ headers: { 'x-user': user } })
    t.same((await app.inject({ url: '/export/quota', ...as('ann') })).json(), { allowed: true, remaining: 2 }, 'a check counts nothing')
    t.same((await app.inject({ url: '/export/quota', ...as('ann') })).json(), { allowed: true, remaining: 2 })
    t.same((await app.inject({ method: 'POST', url: '/export', ...as('ann') })).json(), { remaining: 1 })
    t.same((await app.inject({ method: 'POST', url: '/export', ...as('ann') })).json(), { remaining: 0 })
    const refused = await app.inject({ method: 'POST', url: '/export', ...as('ann') })
    t.equal(refused.statusCode, 429)
    t.ok(Number(refused.headers['retry-after']) > 0 && Number(refused.headers['retry-after']) <= 60)
    t.same((await app.inject({ url: '/export/quota', ...as('ann') })).json(), { allowed: false, remaining: 0 })
    t.same((await app.inject({ url: '/export/quota', ...as('bob') })).json(), { allowed: true, remaining: 2 }, 'the identity given is the key')

    // An allow list: the peer's limiter answers `{ isAllowed: true }` for a listed key; a policy here
    // has no allowList (refused, naming it): the caller skips `consume` for the identities it exempts.
    const theirs = Fastify()
    t.teardown(() => theirs.close())
    await theirs.register(rateLimit, { global: false })
    const check = theirs.createRateLimit({ max: 1, allowList: ['vip'], keyGenerator: (request) => String(request.headers['x-user']) })
    await theirs.ready()
    const request = { headers: { 'x-user': 'vip' }, routeOptions: { config: {} } } as unknown as Parameters<typeof check>[0]
    t.match(await check(request), { isAllowed: true, key: 'vip' }, "the peer's answer for a listed key")
    const error = (() => {
      try {
        app.rates.use('vip-exports', { algorithm: 'fixed-window', limit: 2, windowMs: 60_000, allowList: ['vip'] } as never)
      } catch (e) {
        return e
      }
    })()
    t.type(error, RatesInvalidArgumentError, 'allowList in a policy is refused')
    t.match((error as Error).message, 'allowList')
    const vips = new Set(['vip'])
    const spend = async (user: string): Promise<boolean> => vips.has(user) || (await exports.consume(user)).allowed
    t.same([await spend('vip'), await spend('vip'), await spend('vip')], [true, true, true], 'the caller skips consume for a listed identity')
  },

  '`normalizeIP`': async (t) => {
    // The same for IPv4, an IPv4-mapped address and any other string (lowercased).
    for (const ip of ['1.2.3.4', '::ffff:1.2.3.4', 'Example.COM']) t.equal(normalizeIP(ip), theirNormalizeIP(ip), ip)
    // IPv6: grouped by 56 here (64 there), and written as the group, `prefix/bits`.
    t.equal(theirNormalizeIP('2001:db8:1:12:abcd::1'), '2001:db8:1:12::')
    t.equal(normalizeIP('2001:db8:1:12:abcd::1', 64), '2001:db8:1:12:0:0:0:0/64')
    t.equal(normalizeIP('2001:db8:1:12:abcd::1'), '2001:db8:1:0:0:0:0:0/56', 'the default, 56')
    // It is the default key's value: a key function that falls back to it shares the default's quota.
    const app = await appWith({ rateLimit: { limit: 1, windowMs: 60_000 }, key: (request) => String(request.headers['x-api-key'] ?? normalizeIP(request.ip)) })
    t.teardown(() => app.close())
    const events: AdmissionDecisionEvent[] = []
    const listener = (message: unknown): void => { events.push(message as AdmissionDecisionEvent) }
    subscribe(DECISION_CHANNEL, listener)
    t.teardown(() => unsubscribe(DECISION_CHANNEL, listener))
    const plain = await appWith({ rateLimit: { limit: 1, windowMs: 60_000 } })
    t.teardown(() => plain.close())
    await app.inject({ url: '/', remoteAddress: '2001:db8:1:12::5' })
    await plain.inject({ url: '/', remoteAddress: '2001:db8:1:12::5' })
    t.equal(events[0]!.key, events[1]!.key, 'the same key as the default')
  },

  '`hook`': async (t) => {
    const other = Fastify()
    t.teardown(() => other.close())
    await t.rejects(async () => { await other.register(admission, { hook: 'preValidation' as 'preHandler' }).ready() }, { name: 'AdmissionOptionError', message: /`hook`/ }, 'other hooks are refused')
    const app = Fastify()
    t.teardown(() => app.close())
    app.addHook('preHandler', async (request) => { request.migrationUser = String(request.headers['x-user']) })
    await app.register(admission, { hook: 'preHandler', rateLimit: { limit: 1, windowMs: 60_000 }, key: (request) => request.migrationUser! })
    app.get('/', async () => 'ok')
    await app.ready()
    t.same(await statuses(app, 2, '/', { 'x-user': 'ann' }), [200, 429])
    t.same(await statuses(app, 1, '/', { 'x-user': 'bob' }), [200], 'the key is read after authentication')
  },

  '`skipOnError`': async (t) => {
    await refuses(t, { skipOnError: true }, 'skipOnError')
    // A memory backend full of live state cannot decide for a new client: the backend failing.
    for (const [onBackendError, status] of [['allow', 200], ['deny', 503]] as const) {
      const app = await appWith({ rateLimit: { limit: 5, windowMs: 60_000 }, backend: memoryBackend({ maxIdentities: 1 }), key: (request) => String(request.headers['x-api-key']), onBackendError })
      t.teardown(() => app.close())
      t.equal((await app.inject({ url: '/', headers: { 'x-api-key': 'a' } })).statusCode, 200)
      const failed = await app.inject({ url: '/', headers: { 'x-api-key': 'b' } })
      t.equal(failed.statusCode, status, `onBackendError: '${onBackendError}'`)
      if (status === 503) t.ok(failed.headers['retry-after'], 'the refusal says when')
      else t.same([failed.headers['ratelimit-policy'], failed.headers.ratelimit], ['"default";q=5;w=60', undefined], 'the policy, no guessed RateLimit')
      t.equal(app.admission.stats().unavailable, 1)
    }
    // Per route, as a route's skipOnError.
    const app = await appWith({ rateLimit: { limit: 5, windowMs: 60_000 }, backend: memoryBackend({ maxIdentities: 1 }), key: (request) => String(request.headers['x-api-key']) }, (app) => {
      app.get('/', async () => 'ok')
      app.get('/lenient', { config: { admission: { onBackendError: 'allow' } } }, async () => 'ok')
    })
    t.teardown(() => app.close())
    t.equal((await app.inject({ url: '/', headers: { 'x-api-key': 'a' } })).statusCode, 200)
    t.equal((await app.inject({ url: '/', headers: { 'x-api-key': 'b' } })).statusCode, 503, 'the plugin\'s deny')
    t.equal((await app.inject({ url: '/lenient', headers: { 'x-api-key': 'b' } })).statusCode, 200, 'the route\'s allow')
    // The peer, its store failing with skipOnError: limit = max and remaining = max, as if nothing
    // were spent; here no RateLimit field (what remains is not known, and is never told higher than it is).
    class FailingStore {
      incr (_key: string, callback: (error: Error | null) => void): void { callback(new Error('store down')) }
      child (): FailingStore { return this }
    }
    const theirs = Fastify()
    t.teardown(() => theirs.close())
    await theirs.register(rateLimit, { max: 5, timeWindow: 60_000, skipOnError: true, store: FailingStore as never })
    theirs.get('/', async () => 'ok')
    const peer = await theirs.inject('/')
    t.same([peer.statusCode, peer.headers['x-ratelimit-limit'], peer.headers['x-ratelimit-remaining']], [200, '5', '5'], "the peer's headers")
  },

  '`redis`, `nameSpace`': async (t) => {
    await refuses(t, { redis: {} }, 'redis')
    await refuses(t, { nameSpace: 'rl:' }, 'nameSpace')
    const shared = await sharedRedis()
    await t.test('two apps on one Redis and prefix share the quota', { skip: 'skip' in shared ? shared.skip : false }, async (t) => {
      const { redis } = shared as { redis: Redis }
      const prefix = uniquePrefix('migration')
      t.teardown(async () => { await deleteKeys(redis, prefix); redis.disconnect() })
      // As two processes would: each app its own registration, one server and prefix.
      const apps = await Promise.all([0, 1].map(async () => await appWith({ rateLimit: { limit: 2, windowMs: 60_000 }, backend: redisBackend({ client: redis, prefix }) })))
      for (const app of apps) t.teardown(() => app.close())
      t.same([...await statuses(apps[0]!, 1), ...await statuses(apps[1]!, 1), ...await statuses(apps[0]!, 1)], [200, 200, 429])
    })
  },

  '`store`': async (t) => {
    await refuses(t, { store: class {} }, 'store')
    const consumed: Array<[string, number]> = []
    const backend: RatesBackend = {
      kind: 'custom',
      limiter: (_address, policy) => ({
        policy,
        consume: async (identity, cost) => {
          consumed.push([identity, cost])
          return consumed.length <= 2 ? { allowed: true, denied: false, remaining: 2 - consumed.length, resetAt: Date.now() + 60_000 } : { allowed: false, denied: true, remaining: 0, retryAfterMs: 30_000, resetAt: Date.now() + 60_000 }
        },
        state: async () => undefined,
        delete: async () => false
      }),
      stop: async () => {}
    }
    const app = await appWith({ rateLimit: { algorithm: 'fixed-window', limit: 2, windowMs: 60_000 }, backend, key: () => 'ann' })
    t.teardown(() => app.close())
    t.same(await statuses(app, 3), [200, 200, 429])
    t.same(consumed, [['ann', 1], ['ann', 1], ['ann', 1]], 'the backend is asked for each decision')
    t.equal((await app.inject('/')).headers['retry-after'], '30', "its wait is the client's")
  },

  '`fastify.rateLimit(opts)`': async (t) => {
    const app = await appWith({ rateLimit: false }, (app) => {
      app.get('/', async () => 'ok')
      app.get('/limited', { config: { admission: { rateLimit: { limit: 1, windowMs: 60_000 } } } }, async () => 'ok')
    })
    t.teardown(() => app.close())
    t.equal(app.hasDecorator('rateLimit'), false, 'the name stays free')
    t.same(await statuses(app, 2, '/limited'), [200, 429], 'a route with its own policy')
    t.same(await statuses(app, 3), [200, 200, 200], 'the others unlimited (global: false)')
  },

  '`onExceeding`, `onExceeded`': async (t) => {
    await refuses(t, { onExceeding: () => {} }, 'onExceeding')
    await refuses(t, { onExceeded: () => {} }, 'onExceeded')
    const limited: Array<[number, string]> = []
    const events: AdmissionDecisionEvent[] = []
    const listener = (message: unknown): void => { events.push(message as AdmissionDecisionEvent) }
    subscribe(DECISION_CHANNEL, listener)
    t.teardown(() => unsubscribe(DECISION_CHANNEL, listener))
    const app = await appWith({ rateLimit: { limit: 1, windowMs: 60_000 }, backend: memoryBackend({ clock: clockAt(1_000).now }), onLimit: (_request, retryAfterMs, key) => { limited.push([retryAfterMs, key]) } })
    t.teardown(() => app.close())
    t.same(await statuses(app, 2), [200, 429])
    t.same(limited, [[60_000, '127.0.0.1']], "onLimit: each refused request, with the wait and the key (onExceeded's second argument)")
    t.match(events.map((e) => [e.outcome, e.key]), [['admitted', '127.0.0.1'], ['limited', '127.0.0.1']], 'onExceeding: the decision channel')
  },

  '`continueExceeding`': async (t) => {
    await refuses(t, { continueExceeding: true }, 'continueExceeding')
    let now = 1_000_000
    const app = await appWith({ rateLimit: { algorithm: 'fixed-window', limit: 2, windowMs: 10_000, penalty: 'restart' }, backend: memoryBackend({ clock: () => now }) })
    t.teardown(() => app.close())
    t.same(await statuses(app, 3), [200, 200, 429])
    const at = async (ms: number): Promise<[number, string | undefined]> => {
      now = 1_000_000 + ms
      const res = await app.inject('/')
      return [res.statusCode, res.headers['retry-after'] as string | undefined]
    }
    t.same(await at(9_000), [429, '10'], 'asked again before the window ended: blocked for a window from now (the window alone would end at 10 000)')
    t.same(await at(18_999), [429, '10'], 'and again')
    t.same(await at(28_998), [429, '10'], '1 ms before the block ends: blocked again')
    t.same(await at(38_998), [200, undefined], 'a whole window without asking: admitted at Retry-After')
  },

  '`exponentialBackoff`': async (t) => {
    await refuses(t, { exponentialBackoff: true }, 'exponentialBackoff')
    let now = 2_000_000
    const app = await appWith({ rateLimit: { algorithm: 'fixed-window', limit: 1, windowMs: 1_000, penalty: { mode: 'double', maxMs: 8_000 } }, backend: memoryBackend({ clock: () => now }) })
    t.teardown(() => app.close())
    t.equal((await app.inject('/')).statusCode, 200)
    const waits: string[] = []
    for (let i = 0; i < 6; i++) {
      now += 1
      waits.push((await app.inject('/')).headers['retry-after'] as string)
    }
    t.same(waits, ['1', '2', '4', '8', '8', '8'], 'Retry-After 1, 2, 4 … windows, at most maxMs')
    now += 8_000
    t.equal((await app.inject('/')).statusCode, 200, 'waited out: admitted, and the block forgotten')
    now += 1
    t.equal((await app.inject('/')).headers['retry-after'], '1', 'the next refusal starts from one window again')
    // On a route: the plugin's policy with the route's penalty.
    const route = await appWith({ rateLimit: { algorithm: 'fixed-window', limit: 1, windowMs: 1_000 } }, (app) => {
      app.get('/', async () => 'ok')
      app.get('/strict', { config: { admission: { rateLimit: { penalty: 'double' } } } }, async () => 'ok')
    })
    t.teardown(() => route.close())
    t.same(await statuses(route, 3, '/strict'), [200, 429, 429])
    t.equal((await route.inject('/strict')).headers['retry-after'], '4', 'the third refusal in a row: four windows')
  },

  '`ban`': async (t) => {
    await refuses(t, { ban: 2 }, 'ban')
    await refuses(t, { onBanReach: () => {} }, 'onBanReach')
    // What to do instead: count refusals in onLimit, answer 403 from the builder.
    const refusals = new Map<string, number>()
    const app = await appWith({
      rateLimit: { limit: 1, windowMs: 60_000 },
      onLimit: (request) => { refusals.set(request.ip, (refusals.get(request.ip) ?? 0) + 1) },
      errorResponseBuilder: (request, context) => (refusals.get(request.ip) ?? 0) > 2
        ? { statusCode: 403, error: 'Forbidden', message: 'banned' }
        : { statusCode: context.statusCode, error: 'Too Many Requests', message: `Retry in ${context.after}` }
    })
    t.teardown(() => app.close())
    t.same(await statuses(app, 5), [200, 429, 429, 403, 403])
  },

  '`cache`': async (t) => {
    await refuses(t, { cache: 5000 }, 'cache')
    const app = await appWith({ rateLimit: { limit: 2, windowMs: 60_000 }, backend: memoryBackend({ maxIdentities: 1 }), key: (request) => String(request.headers['x-api-key']), onBackendError: 'deny' })
    t.teardown(() => app.close())
    t.same(await statuses(app, 1, '/', { 'x-api-key': 'a' }), [200])
    t.same(await statuses(app, 1, '/', { 'x-api-key': 'b' }), [503], 'at the bound a new client is refused, nobody evicted')
    t.same(await statuses(app, 2, '/', { 'x-api-key': 'a' }), [200, 429], 'the first client\'s count was kept')
  },

  '`global`, route `config.rateLimit`': async (t) => {
    await refuses(t, { global: false }, 'global')
    const app = await appWith({ rateLimit: false }, (app) => {
      app.get('/limited', { config: { admission: { rateLimit: { limit: 1, windowMs: 60_000 } } } }, async () => 'ok')
      app.get('/free', async () => 'ok')
      app.get('/health', { config: { admission: false } }, async () => 'ok')
      // @fastify/rate-limit's route config is another plugin's key: not read here (warned at startup).
      app.get('/theirs', { config: { rateLimit: { max: 1 } } } as object, async () => 'ok')
    })
    t.teardown(() => app.close())
    t.same(await statuses(app, 2, '/limited'), [200, 429])
    t.same(await statuses(app, 3, '/free'), [200, 200, 200])
    t.equal((await app.inject('/free')).headers.ratelimit, undefined, 'no plugin-wide limit')
    t.same(await statuses(app, 3, '/health'), [200, 200, 200])
    t.same(await statuses(app, 3, '/theirs'), [200, 200, 200], 'config.rateLimit is not read (a warning says so at startup)')
    // `config: { rateLimit: false }` under a plugin-wide limit: the route is limited here, and a
    // warning of its own says so, once per route (not again for its HEAD twin).
    const lines: Array<{ level: number, msg: string, route?: string }> = []
    const logged = Fastify({ logger: { level: 'warn', stream: { write: (line: string) => { lines.push(JSON.parse(line)) } } } })
    t.teardown(() => logged.close())
    await logged.register(admission, { rateLimit: { limit: 1, windowMs: 60_000 } })
    logged.get('/health', { config: { rateLimit: false } } as object, async () => 'ok')
    await logged.ready()
    t.same(lines.map((line) => line.route), ['GET /health'])
    t.match(lines[0]!.msg, 'the route is rate limited by this plugin; to opt it out, give it config.admission: false')
    t.same(await statuses(logged, 2, '/health'), [200, 429])
  },

  '`addHeaders`, `addHeadersOnExceeding`': async (t) => {
    for (const name of ['addHeaders', 'addHeadersOnExceeding']) {
      await refuses(t, { [name]: { 'x-ratelimit-limit': false } }, name)
      const hinted = await Fastify().register(admission, { [name]: {} } as never).ready().then(() => undefined, (e: unknown) => e) as Error
      t.match(hinted.message, "headers: { format: 'x-ratelimit' }", `${name}'s hint names the format`)
    }
    // @fastify/rate-limit's own first test (max 2): x-ratelimit-limit and -remaining on every
    // answer, Retry-After on the 429, and a reset never earlier than it.
    const app = await appWith({ rateLimit: { limit: 2, windowMs: 60_000 }, headers: { format: 'x-ratelimit' } })
    t.teardown(() => app.close())
    const answers = [await app.inject('/'), await app.inject('/'), await app.inject('/')]
    t.same(answers.map((a) => [a.statusCode, a.headers['x-ratelimit-limit'], a.headers['x-ratelimit-remaining']]), [[200, '2', '1'], [200, '2', '0'], [429, '2', '0']])
    t.equal(answers[2]!.headers['x-ratelimit-reset'], answers[2]!.headers['retry-after'], 'on the 429, reset and Retry-After name the same moment')
    for (const a of answers) t.equal(a.headers.ratelimit, undefined, 'no draft-11 field beside them (a parser would read it first)')

    const off = await appWith({ rateLimit: { limit: 1, windowMs: 60_000 }, headers: false })
    t.teardown(() => off.close())
    t.equal((await off.inject('/')).headers.ratelimit, undefined)
    const offRefused = await off.inject('/')
    t.equal(offRefused.headers['ratelimit-policy'], undefined, 'all or none')
    t.equal(offRefused.headers['retry-after'], '60', 'Retry-After on every refusal')
  },

  '`enableDraftSpec`': async (t) => {
    await refuses(t, { enableDraftSpec: true }, 'enableDraftSpec')
    const hinted = await Fastify().register(admission, { enableDraftSpec: true } as never).ready().then(() => undefined, (e: unknown) => e) as Error
    t.match(hinted.message, "headers: { format: 'draft-6' }", 'the hint names the format that sends its fields')
    // @fastify/rate-limit's enableDraftSpec test (max 2): ratelimit-limit, -remaining, and on the
    // 429 a ratelimit-reset equal to Retry-After.
    const app = await appWith({ rateLimit: { limit: 2, windowMs: 60_000 }, headers: { format: 'draft-6' } })
    t.teardown(() => app.close())
    const answers = [await app.inject('/'), await app.inject('/'), await app.inject('/')]
    t.same(answers.map((a) => [a.statusCode, a.headers['ratelimit-limit'], a.headers['ratelimit-remaining']]), [[200, '2', '1'], [200, '2', '0'], [429, '2', '0']])
    t.equal(answers[2]!.headers['ratelimit-reset'], answers[2]!.headers['retry-after'])
    const plain = await appWith({ rateLimit: { limit: 2, windowMs: 60_000 } })
    t.teardown(() => plain.close())
    const res = await plain.inject('/')
    for (const name of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset']) t.equal(res.headers[name], undefined, `by default no ${name}`)
    t.match(res.headers.ratelimit, /^"default";r=\d+;t=\d+$/, 'the default: draft 11')
  }
}

t.test(`every row of the table in ${PAGE} has its test, and every test its row`, async (t) => {
  t.same(tableRows().sort(), Object.keys(ROWS).sort())
})

for (const [row, test] of Object.entries(ROWS)) t.test(`row ${row}`, test)
