// Each registration is a gate of its own: its own address (so its own quotas on a shared
// backend), its own decorator, its own registry of client states.
import t from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import admission, { memoryBackend, RatesInvalidArgumentError, RatesStoppedError } from '../../lib/index.js'
import { thrown } from '../helpers/errors.js'

const T0 = 1_700_000_000_000

t.test('a root and a child registration on one backend: two quotas, two decorators, no conflict', async (t) => {
  const backend = memoryBackend()
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend, rateLimit: { limit: 4, windowMs: 60_000 } })
  let child!: FastifyInstance
  let other!: FastifyInstance
  await app.register(async function shop (c) {
    child = c
    await c.register(admission, { backend, rateLimit: { limit: 4, windowMs: 60_000 } })
    c.get('/child', async () => 'child')
  })
  await app.register(async function blog (c) {
    other = c
    // Another policy on the same backend: its own address, so no RATES_POLICY_CONFLICT.
    await c.register(admission, { backend, rateLimit: { limit: 2, windowMs: 1000 } })
  })
  await app.ready()
  const statuses: number[] = []
  for (let i = 0; i < 5; i++) statuses.push((await app.inject('/child')).statusCode)
  t.same(statuses, [200, 200, 200, 200, 429], 'limit 4 admits 4: each gate counts the request once, on its own quota')
  t.equal(app.admission.address, 'app')
  t.equal(child.admission.address, 'app/shop')
  t.equal(other.admission.address, 'app/blog')
  t.not(child.admission, app.admission)
  t.match(app.admission.stats(), { admitted: 4, limited: 1 })
  t.match(child.admission.stats(), { admitted: 4, limited: 0 }, 'the outer gate refused the fifth first')
  t.equal(other.admission.stats().admitted, 0)
  // Four of four tokens spent (in units of 1/60 000 of a token): less than one whole token back since.
  for (const registry of [app.admission.registry, child.admission.registry]) {
    const state = await registry.get('127.0.0.1') as { tokens: number, last: number }
    t.ok(state.tokens < 60_000 && Number.isSafeInteger(state.last), `less than a token left: ${state.tokens}`)
  }
  t.equal(await other.admission.registry.get('127.0.0.1'), undefined)
  // A context below a registration sees the nearest one.
  let grandchild!: FastifyInstance
  const nested = Fastify()
  t.teardown(() => nested.close())
  await nested.register(admission)
  await nested.register(async (c) => { await c.register(async (g) => { grandchild = g }) })
  await nested.ready()
  t.equal(grandchild.admission, nested.admission)
})

t.test('addresses: structural, the same in every process of the same code; siblings told apart in order', async (t) => {
  const build = async (): Promise<string[]> => {
    const app = Fastify()
    const seen: FastifyInstance[] = []
    await app.register(admission)
    const plugin = async (c: FastifyInstance): Promise<void> => { await c.register(admission); seen.push(c) }
    await app.register(plugin, { prefix: '/v1' })
    await app.register(plugin, { prefix: '/v1' })
    await app.register(async (c) => { await c.register(admission); seen.push(c) })
    await app.ready()
    const addresses = [app.admission.address, ...seen.map((c) => c.admission.address)]
    await app.close()
    return addresses
  }
  const first = await build()
  t.match(first, ['app', 'app/plugin@%2Fv1', 'app/plugin@%2Fv1~1', /^app\/anonymous-[0-9a-f]{8}$/])
  t.same(await build(), first, 'another app of the same code: the same addresses')
})

t.test('two registrations in one context: the second is refused (a client would be promised one quota and refused by the other)', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: { limit: 10, windowMs: 60_000 } })
  const first = app.admission
  await t.rejects(async () => { await app.register(admission, { rateLimit: { limit: 3, windowMs: 60_000 } }) }, { code: 'ADMISSION_DUPLICATE_REGISTRATION', message: /registered twice in one context \(at "app"\).*child context/ })
  t.equal(app.admission, first)
  // Separate gates stay possible, one context each.
  const other = Fastify()
  t.teardown(() => other.close())
  await other.register(admission, { rateLimit: { limit: 10, windowMs: 60_000 } })
  await other.register(async (child) => {
    await child.register(admission, { rateLimit: { limit: 3, windowMs: 60_000 } })
    child.get('/', async () => 'ok')
  })
  const answers = []
  for (let i = 0; i < 4; i++) answers.push(await other.inject('/'))
  t.same(answers.map((answer) => answer.statusCode), [200, 200, 200, 429])
})

t.test('version: part of every quota\'s address, so a changed policy starts on fresh quotas', async (t) => {
  const backend = memoryBackend()
  const v1 = Fastify()
  t.teardown(() => v1.close())
  await v1.register(admission, { backend, rateLimit: { limit: 1, windowMs: 60_000 } })
  v1.get('/', async () => 'ok')
  t.equal((await v1.inject('/')).statusCode, 200)
  // The same app, next deploy, same backend: another limit under the same address is a conflict...
  const conflicting = Fastify()
  t.teardown(() => conflicting.close())
  const error = await conflicting.register(admission, { backend, rateLimit: { limit: 5, windowMs: 60_000 } }).then(() => undefined, (e: unknown) => e)
  t.match(error, { code: 'RATES_POLICY_CONFLICT' })
  // ...while a version moves it to an address of its own.
  const v2 = Fastify()
  t.teardown(() => v2.close())
  await v2.register(admission, { backend, version: '2', rateLimit: { limit: 5, windowMs: 60_000 } })
  v2.get('/', async () => 'ok')
  v2.get('/own', { config: { admission: { rateLimit: { limit: 1, windowMs: 1000 } } } }, async () => 'ok')
  await v2.ready()
  t.equal((await v2.inject('/')).statusCode, 200, 'a fresh quota under the new policy')
  t.equal((await v1.inject('/')).statusCode, 429, 'the old version keeps its own')
  for (const bad of ['', 'a b', 'x'.repeat(65), 2, '{v}']) {
    const app = Fastify()
    const failure = await app.register(admission, { version: bad as string }).then(() => undefined, (e: unknown) => e)
    t.match(failure, { code: 'ADMISSION_INVALID_OPTION', path: 'version' }, JSON.stringify(bad))
  }
})

t.test('the registry: the card\'s Bucket values, read and reset by key, on the shared and a route\'s own quota', async (t) => {
  const clock = { now: T0 }
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend: memoryBackend({ clock: () => clock.now }), rateLimit: { limit: 10, windowMs: 1000, burst: 5 } })
  app.get('/', async () => 'ok')
  app.post('/login', { config: { admission: { rateLimit: { limit: 2, windowMs: 60_000 } } } }, async () => 'ok')
  app.get('/open', { config: { admission: false } }, async () => 'ok')
  await app.ready()
  const registry = app.admission.registry
  t.equal(await registry.get('127.0.0.1'), undefined, 'no state: a fresh client')
  await app.inject('/')
  await app.inject('/')
  // 5 tokens of capacity in units of 1/1000 of a token; two spent at T0.
  t.strictSame(await registry.get('127.0.0.1'), { tokens: 3000, last: T0 })
  clock.now = T0 + 150
  t.equal((await app.inject('/')).headers.ratelimit, '"default";r=3;t=1', '1.5 tokens back, one spent')
  t.strictSame(await registry.get('127.0.0.1'), { tokens: 3500, last: T0 + 150 })

  const login = app.admission.registryOf('POST /login')!
  for (let i = 0; i < 3; i++) await app.inject({ method: 'POST', url: '/login' })
  t.equal((await app.inject({ method: 'POST', url: '/login' })).statusCode, 429)
  t.strictSame(await login.get('127.0.0.1'), { tokens: 0, last: T0 + 150 })
  t.equal(await login.delete('127.0.0.1'), true, 'after a successful login: start fresh')
  t.equal(await login.delete('127.0.0.1'), false, 'nothing left to delete')
  t.equal((await app.inject({ method: 'POST', url: '/login' })).statusCode, 200)
  t.strictSame(await registry.get('127.0.0.1'), { tokens: 3500, last: T0 + 150 }, 'the shared quota is another one')

  t.equal(app.admission.registryOf('GET /')?.constructor, Object, 'a route on the shared quota reaches it too')
  t.strictSame(await app.admission.registryOf('GET /')!.get('127.0.0.1'), { tokens: 3500, last: T0 + 150 })
  t.equal(app.admission.registryOf('GET /open'), undefined, 'opted out: no quota')
  t.equal(app.admission.registryOf('GET /nowhere'), undefined)
  t.type(await registry.get(5 as never).catch((e: unknown) => e), RatesInvalidArgumentError)
  t.type(await registry.delete(undefined as never).catch((e: unknown) => e), RatesInvalidArgumentError)
  // IPv6 clients are found by their address, grouped as the gate groups them.
  await app.inject({ url: '/', remoteAddress: '2001:db8:1:2:3:4:5:6' })
  t.ok(await registry.get('2001:db8:1:2:ffff::1'), 'same /56')
  t.ok(await registry.delete('2001:db8:1:2::9'))
})

t.test('the registry without a rate limit, and after close', async (t) => {
  const app = Fastify()
  await app.register(admission, { rateLimit: false })
  await app.ready()
  t.equal(await app.admission.registry.get('k'), undefined)
  t.equal(await app.admission.registry.delete('k'), false)
  const limited = Fastify()
  await limited.register(admission)
  await limited.ready()
  const registry = limited.admission.registry
  await limited.close()
  t.type(await registry.get('k').catch((e: unknown) => e), RatesStoppedError)
  t.type(await registry.delete('k').catch((e: unknown) => e), RatesStoppedError)
  await app.close()
})

t.test('a stopped backend the application owns: rates.use() rethrows its RatesStoppedError', async (t) => {
  const backend = memoryBackend()
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend, rateLimit: false })
  await app.ready()
  await backend.stop()
  t.type(thrown(() => app.rates.use('late', { algorithm: 'fixed-window', limit: 1, windowMs: 1000 })), RatesStoppedError)
})

t.test('printRoutes shows the gate\'s onRequest and onResponse on gated routes only', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { maxInFlight: 4 })
  app.get('/gated', { onRequest: async () => {}, onResponse: [async () => {}] }, async () => 'ok')
  app.get('/open', { config: { admission: false } }, async () => 'ok')
  await app.ready()
  const routes = app.printRoutes({ includeHooks: true, commonPrefix: false })
  t.match(routes, /\/gated \(GET\)\n.*• \(onRequest\) \["admissionOnRequest\(\)","onRequest\(\)"\]\n.*• \(onResponse\) \["admissionOnResponse\(\)","anonymous\(\)"\]/,
    'ours first, then the route\'s own')
  t.match(routes, /\/gated \(HEAD\)\n.*• \(onRequest\) \["admissionOnRequest\(\)"/, 'the automatic HEAD too')
  const open = routes.slice(routes.indexOf('/open (GET)'))
  t.notMatch(open, /admission/, 'an opted-out route runs no hook of this plugin')
})
