// Golden addresses: the exact strings the gate and the rates capability hand a backend as a quota's
// address (`limiter(address, policy)`, `stack(address, policies)`), pinned byte for byte as the code
// gave them at c593bb6. On a shared backend (Redis) an address is part of every key, so a deploy of a
// new version must give every quota the same string as the old one, or it starts on fresh quotas
// (and the old keys linger until their TTL). A change here moves keys: only on purpose, with a
// `version` bump or a migration note.
//
// The expected strings are literals, never computed by the code under test. Some of them pin
// behaviour that looks accidental (marked "observed"): they are pinned all the same, since a fix
// would move those keys too.
import { createRequire } from 'node:module'
import t from 'tap'
import Fastify, { type FastifyInstance, type FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import admission, { memoryBackend, type RatePolicy, type RatesBackend } from '../../lib/index.js'

const P: RatePolicy = { algorithm: 'fixed-window', limit: 5, windowMs: 1000 }
const Q: RatePolicy = { algorithm: 'fixed-window', limit: 7, windowMs: 1000 }
const PAIR: RatePolicy[] = [P, { ...P, windowMs: 60_000 }]

/** A backend that records each quota it is asked for (`limiter <address>` or `stack <address>`), over memory's. */
function recording (): { backend: RatesBackend, calls: string[] } {
  const inner = memoryBackend()
  const calls: string[] = []
  const backend: RatesBackend = {
    kind: 'recording',
    limiter: (address, policy) => { calls.push(`limiter ${address}`); return inner.limiter(address, policy) },
    stack: (address, policies) => { calls.push(`stack ${address}`); return inner.stack(address, policies) },
    stop: async () => { await inner.stop() }
  }
  return { backend, calls }
}

/**
 * A plugin with no name whose source Fastify sees as these two lines, whatever the transpiler
 * made of this file: Fastify names such a plugin by the first two lines of `toString()`.
 */
function anonymous (body: (child: FastifyInstance) => Promise<void>): (child: FastifyInstance) => Promise<void> {
  const plugin = [async (child: FastifyInstance) => { await body(child) }][0]!
  Object.defineProperty(plugin, 'name', { value: '' })
  Object.defineProperty(plugin, 'toString', { value: () => 'async (child) => {\n  golden anonymous\n}' })
  return plugin
}

t.test('gate: the shared quota and routes of one registration at the root', async (t) => {
  const { backend, calls } = recording()
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend })
  app.get('/shared', async () => 'on the shared quota: no address of its own')
  app.get('/x', { config: { admission: { rateLimit: P } } }, async () => 'x (its HEAD twin shares it)')
  app.route({ method: ['GET', 'POST'], url: '/m', config: { admission: { rateLimit: P } }, handler: async () => 'm' })
  app.head('/h', { config: { admission: { rateLimit: P } } }, async () => 'h')
  app.get('/d', { constraints: { version: '1.0.0' }, config: { admission: { rateLimit: P } } }, async () => 'd1')
  app.get('/d', { constraints: { version: '2.0.0' }, config: { admission: { rateLimit: P } } }, async () => 'd2')
  app.get('/g1', { config: { admission: { groupId: 'team a~b', rateLimit: P } } }, async () => 'g1')
  app.get('/g2', { config: { admission: { groupId: 'team a~b', rateLimit: P } } }, async () => 'g2')
  app.get('/t', { config: { admission: { rateLimit: { tiers: { free: P, pro: PAIR }, tier: () => 'free' } } } }, async () => 't')
  app.get('/s', { config: { admission: { rateLimit: PAIR } } }, async () => 's')
  app.post('/login', { config: { admission: { rateLimit: P, count: 'failures' } } }, async () => 'login')
  app.get('/users/:id', { config: { admission: { rateLimit: P } } }, async () => 'u')
  app.get('/files/*', { config: { admission: { rateLimit: P } } }, async () => 'f')
  app.get('/café ~x', { config: { admission: { rateLimit: P } } }, async () => 'c')
  await app.ready()
  t.equal(app.admission.address, 'app')
  t.strictSame(calls, [
    'limiter app#admission:*', // the plugin's shared quota
    'limiter app#admission:GET%20%2Fx', // GET /x; its automatic HEAD shares it
    'limiter app#admission:GET%2CPOST%20%2Fm', // a methods list, joined by ','
    'limiter app#admission:HEAD%20%2Fh', // a HEAD route of its own
    'limiter app#admission:GET%20%2Fd', // the first of two GET /d (told apart by constraints)
    'limiter app#admission:GET%20%2Fd%20%232', // the second: `GET /d #2`
    'limiter app#admission:group%3Ateam%20a%7Eb', // group `team a~b`, once for its two routes
    'limiter app#admission:GET%20%2Ft%7Efree', // tier free: `<route>~<tier>`
    'stack app#admission:GET%20%2Ft%7Epro', // tier pro, a list of policies: a stack
    'stack app#admission:GET%20%2Fs', // a list of policies
    'stack app#admission:POST%20%2Flogin', // login throttling: a stack of one
    'limiter app#admission:GET%20%2Fusers%2F%3Aid',
    'limiter app#admission:GET%20%2Ffiles%2F*', // encodeURIComponent leaves `*` (and `!'()`) as they are
    'limiter app#admission:GET%20%2Fcaf%C3%A9%20%7Ex' // UTF-8 percent-encoded; `~` too
  ])
})

t.test('gate: version, in every quota\'s address', async (t) => {
  const { backend, calls } = recording()
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend, version: 'v2', rateLimit: PAIR })
  app.get('/x', { config: { admission: { rateLimit: P } } }, async () => 'x')
  app.get('/g', { config: { admission: { groupId: 'g', rateLimit: P } } }, async () => 'g')
  await app.ready()
  t.strictSame(calls, [
    'stack app#admission@v2:*',
    'limiter app#admission@v2:GET%20%2Fx',
    'limiter app#admission@v2:group%3Ag'
  ])
})

t.test('gate: registrations in the plugin tree', async (t) => {
  const { backend, calls } = recording()
  const app = Fastify()
  t.teardown(() => app.close())
  const at: Record<string, FastifyInstance> = {}
  await app.register(admission, { backend })
  await app.register(async function shop (c) {
    at.shop = c
    await c.register(admission, { backend })
    await c.register(async function inner (i) { at.inner = i; await i.register(admission, { backend }) }, { prefix: '/in' })
    await c.register(async function plain (i) { at.plain = i; await i.register(admission, { backend }) })
  }, { prefix: '/shop' })
  await app.register(anonymous(async (c) => { at.anonymous = c; await c.register(admission, { backend }) }))
  await app.register(async function café (c) { at.cafe = c; await c.register(admission, { backend }) }, { prefix: '/ü ~x' })
  await app.register(fp(async (c) => { at.spaced = c; await c.register(admission, { backend }) }, { name: 'my plugin~1', encapsulate: true }))
  await app.register(fp(async (c) => { at.scoped = c; await c.register(admission, { backend }) }, { name: '@scope/plug', encapsulate: true }))
  await app.register(async function twice (c) { at.twice1 = c; await c.register(admission, { backend }) })
  await app.register(async function twice (c) { at.twice2 = c; await c.register(admission, { backend }) })
  await app.ready()
  t.strictSame(calls, [
    'limiter app#admission:*', // (a second registration in one context is refused)
    'limiter app/shop@%2Fshop#admission:*', // a child: its plugin's name, `@` and its prefix
    'limiter app/shop@%2Fshop/inner@%2Fshop%2Fin#admission:*', // the context's whole prefix, not the one its registration gave
    'limiter app/shop@%2Fshop/plain@%2Fshop#admission:*', // observed: no prefix of its own, its parent's
    'limiter app/anonymous-bc16a750#admission:*', // no name: `anonymous-` and 8 hex of the SHA-1 of Fastify's name for it
    'limiter app/anonymous-f424452a@%2F%C3%BC%20%7Ex#admission:*', // observed: a name beyond [\\w.@/-] (`café`) is hashed as well
    'limiter app/anonymous-73ff9b56#admission:*', // as is `my plugin~1` (a space and a tilde)
    'limiter app/%40scope%2Fplug#admission:*', // `@scope/plug`: kept, percent-encoded
    'limiter app/twice#admission:*',
    'limiter app/twice~1#admission:*' // a sibling of the same name: `~1`
  ])
  t.strictSame(Object.fromEntries(Object.entries(at).map(([name, c]) => [name, c.admission.address])), {
    shop: 'app/shop@%2Fshop',
    inner: 'app/shop@%2Fshop/inner@%2Fshop%2Fin',
    plain: 'app/shop@%2Fshop/plain@%2Fshop',
    anonymous: 'app/anonymous-bc16a750',
    cafe: 'app/anonymous-f424452a@%2F%C3%BC%20%7Ex',
    spaced: 'app/anonymous-73ff9b56',
    scoped: 'app/%40scope%2Fplug',
    twice1: 'app/twice',
    twice2: 'app/twice~1'
  }, 'the decorator\'s address is the quotas\' prefix')
  t.equal(at.anonymous!.pluginName, 'async (child) => { -- golden anonymous -> fastify-admission', 'the name Fastify gave (hashed above without its chain)')
})

t.test('gate: a route seen by three registrations, each pairing the HEAD twin with its GET', async (t) => {
  // Every registration above a route gates it, and each gives GET /shop/x's automatic HEAD twin
  // the GET's quota. (Before the gate's plans, registrations after the first saw the handler the
  // first one wrapped, did not pair the twin, and opened \`HEAD %2Fshop%2Fx\` quotas of their own:
  // those keys are no longer used; HEAD requests count on the GET's quota, as under one registration.)
  const { backend, calls } = recording()
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend, rateLimit: false })
  await app.register(async function outer (o) {
    await o.register(admission, { backend, rateLimit: false })
    await o.register(async function shop (c) {
      await c.register(admission, { backend, rateLimit: false })
      c.get('/x', { config: { admission: { rateLimit: P } } }, async () => 'x')
    }, { prefix: '/shop' })
  })
  await app.ready()
  t.strictSame(calls, [
    'limiter app#admission:GET%20%2Fshop%2Fx',
    'limiter app/outer#admission:GET%20%2Fshop%2Fx',
    'limiter app/outer/shop@%2Fshop#admission:GET%20%2Fshop%2Fx'
  ])
})

t.test('gate: a tier and a route can meet at one address (observed)', async (t) => {
  // `GET /x` tier `gold` is `GET /x~gold`, as is the route `GET /x~gold`: one address, so one quota
  // with the same policy, a conflict with another.
  const { backend, calls } = recording()
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend, rateLimit: false })
  app.get('/x', { config: { admission: { rateLimit: { tiers: { gold: P }, tier: () => 'gold' } } } }, async () => 'x')
  app.get('/x~gold', { config: { admission: { rateLimit: Q } } }, async () => 'x~gold')
  await t.rejects(async () => { await app.ready() }, { code: 'RATES_POLICY_CONFLICT' })
  t.strictSame(calls.slice(0, 2), ['limiter app#admission:GET%20%2Fx%7Egold', 'limiter app#admission:GET%20%2Fx%7Egold'])
})

t.test('rates: limiters by context', async (t) => {
  const { backend, calls } = recording()
  const app = Fastify()
  t.teardown(() => app.close())
  let unseen!: FastifyInstance
  // Created before the plugin: never seen by its onRegister hook, addressed when it first asks.
  await app.register(async function early (c) { unseen = c; await c.register(fp(async () => {}, { name: 'helper' })) }, { prefix: '/e' })
  await app.register(admission, { backend, rateLimit: false })
  app.rates.use('send', P)
  app.rates.use('a~b c/d', P)
  app.rates.use('pair', PAIR)
  app.rates.global.use('egress', P)
  await app.register(async function child (c) {
    c.rates.use('send', P)
    c.rates.global.use('egress', P)
    await c.register(async function grand (g) { g.rates.use('send', P) }, { prefix: '/g' })
  }, { prefix: '/c' })
  await app.register(fp(async function shared (c) { c.rates.use('fp', P) }))
  await app.register(fp(async function enc (c) { c.rates.use('fp', P) }, { encapsulate: true, name: 'enc plugin' }))
  await app.register(async function twin (c) { c.rates.use('send', P) })
  await app.register(async function twin (c) { c.rates.use('send', P) })
  await app.register(async function café (c) { c.rates.use('send', P) }, { prefix: '/ü ~x' })
  await app.register(anonymous(async (c) => { c.rates.use('send', P) }))
  await app.ready()
  unseen.rates.use('send', P)
  t.strictSame(calls, [
    'limiter app#send', // the context that registered the plugin
    'limiter app#a~b%20c%2Fd', // a limiter's name: encodeURIComponent only (its `~` stays)
    'stack app#pair',
    'limiter global#egress', // rates.global: one address for every caller
    'limiter app/child@%2Fc#send', // a child: its name, `@` and the prefix its registration gave
    'limiter global#egress',
    'limiter app/child@%2Fc/grand@%2Fg#send', // the grandchild's own prefix, not the whole one
    'limiter app#fp', // a fastify-plugin shares its parent's context
    'limiter app/enc%20plugin#fp', // an encapsulating one: its `name` option, encoded
    'limiter app/twin#send',
    'limiter app/twin~1#send', // a sibling of the same name: `~1`
    'limiter app/caf%C3%A9@%2F%C3%BC%20%7Ex#send', // a name beyond ASCII: encoded, not hashed as the gate does
    'limiter app/async%20(child)%20%3D%3E%20%7B%20--%20golden%20anonymous#send', // no name: Fastify's, encoded whole, not hashed
    'limiter app/early%20-%3E%20helper@%2Fe#send' // observed: a context unseen at registration is named by its whole plugin chain
  ])
})

t.test('rates: the plugin registered in a child addresses from there (observed)', async (t) => {
  // The context that registers the plugin is `app` to the rates capability, wherever it sits: two
  // sibling plugins that each register fastify-admission on one backend share `app#send`.
  const { backend, calls } = recording()
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(async function shop (c) {
    await c.register(admission, { backend })
    c.rates.use('send', P)
    await c.register(async function x (x) { x.rates.use('send', P) })
  })
  await app.register(async function blog (c) {
    await c.register(admission, { backend })
    c.rates.use('send', P)
  })
  await app.ready()
  t.strictSame(calls, [
    'limiter app/shop#admission:*',
    'limiter app#send',
    'limiter app/x#send',
    'limiter app/blog#admission:*',
    'limiter app#send'
  ])
})

t.test('observed: a plugin that is a CommonJS module\'s export is named by its file path', async (t) => {
  // Fastify names a plugin found in require.cache by the module's absolute file name, before its
  // function name: its quotas' addresses then change with the directory the application runs from
  // (a release directory per deploy moves every one of them). Pinned as a rule, not a literal: the
  // path is this checkout's.
  const require = createRequire(import.meta.url)
  const file = require.resolve('./fixtures/path-named-plugin.cjs')
  const plugin = require(file) as FastifyPluginAsync<{ admission: typeof admission, backend: RatesBackend, seen: FastifyInstance[] }>
  const { backend, calls } = recording()
  const app = Fastify()
  t.teardown(() => app.close())
  const seen: FastifyInstance[] = []
  await app.register(admission, { backend, rateLimit: false })
  await app.register(plugin, { admission, backend, seen })
  await app.ready()
  t.equal(seen[0]!.pluginName, `${file} -> fastify-admission`, 'named by its path, not `routes`')
  t.equal(calls.at(-1), `limiter app/${encodeURIComponent(file).replaceAll('~', '%7E')}#send`, 'the rates limiter: the path, encoded')
  t.not(seen[0]!.admission.address, 'app/routes', 'the gate: the path (or its hash, beyond 64 characters), not the function name')
})
