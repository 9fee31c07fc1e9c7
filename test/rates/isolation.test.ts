// Caller isolation through the real plugin: a limiter's quota belongs to the Fastify encapsulation
// context that called use(); addresses are structural (the same code gives the same address, in
// another app or process); rates.global shares on purpose.
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import admission, {
  memoryBackend, type MemoryBackend, RatesPolicyConflictError, type RateLimiter, type RatePolicy
} from '../../lib/index.js'
import { ContextAddresses } from '../../lib/rates/context-address.js'
import { thrown } from '../helpers/errors.js'

const T0 = 1_700_000_000_000
const P: RatePolicy = { algorithm: 'fixed-window', limit: 2, windowMs: 60_000 }

type Tap = Test

/** The addresses a memory backend holds quotas at (a private field, read for this test only). */
function addressesOf (backend: MemoryBackend): string[] {
  return [...(backend as unknown as { quotas: { addresses (): IterableIterator<string> } }).quotas.addresses()]
}

/** Takes the whole quota of `identity` (capacity 2), then tells whether another consume passes. */
async function drain (l: RateLimiter, identity: unknown = 'u'): Promise<void> {
  const d = await l.consume(identity as string, { cost: 2 })
  if (!d.allowed) throw new Error(`drain: ${JSON.stringify(d)}`)
}
async function passes (l: RateLimiter, identity: unknown = 'u'): Promise<boolean> {
  return (await l.consume(identity as string)).allowed
}

async function app (t: Tap, backend: MemoryBackend, options: Record<string, unknown> = {}): Promise<FastifyInstance> {
  const instance = Fastify()
  t.teardown(() => instance.close())
  await instance.register(admission, { backend, ...options })
  return instance
}

// One plugin, registered in several places of the tree below.
async function messaging (child: FastifyInstance, opts: { handles?: RateLimiter[] }): Promise<void> {
  opts.handles?.push(child.rates.use('send', P))
}

interface Tree {
  root: RateLimiter
  messaging: RateLimiter
  billing: RateLimiter
  v1: RateLimiter
  v2: RateLimiter
  messagingAgain: RateLimiter
  nested: RateLimiter
  viaFp: RateLimiter
  fpEncapsulated: RateLimiter
  globalA: RateLimiter
  globalB: RateLimiter
}

/** The same plugin tree, built the same way every time. */
async function tree (instance: FastifyInstance): Promise<Tree> {
  const got: Partial<Tree> = {}
  const one = (): { handles: RateLimiter[] } => ({ handles: [] })
  got.root = instance.rates.use('send', P)
  const m = one()
  await instance.register(async function messagingPlugin (child) {
    await messaging(child, m)
    got.globalA = child.rates.global.use('egress', P)
  })
  got.messaging = m.handles[0]
  await instance.register(async function billing (child) {
    got.billing = child.rates.use('send', P)
    got.globalB = child.rates.global.use('egress', P)
  })
  const v1 = one()
  const v2 = one()
  await instance.register(messaging, { prefix: '/v1', ...v1 })
  await instance.register(messaging, { prefix: '/v2', ...v2 })
  got.v1 = v1.handles[0]
  got.v2 = v2.handles[0]
  const again = one()
  await instance.register(async function messagingPlugin (child) {
    await messaging(child, again)
  })
  got.messagingAgain = again.handles[0]
  const nested = one()
  await instance.register(async function outer (child) {
    await child.register(messaging, nested)
  })
  got.nested = nested.handles[0]
  await instance.register(fp(async function shared (inst) {
    got.viaFp = inst.rates.use('send', P)
  }))
  await instance.register(fp(async function encapsulated (inst) {
    got.fpEncapsulated = inst.rates.use('send', P)
  }, { encapsulate: true, name: 'encapsulated-plugin' }))
  // A route with its own rate limit: the gate's limiter lives in the same backend.
  await instance.register(async function routes (child) {
    child.get('/limited', { config: { admission: { rateLimit: { algorithm: 'gcra', limit: 5, windowMs: 1000 } } } }, async () => 'ok')
  })
  await instance.ready()
  return got as Tree
}

const EXPECTED_ADDRESSES = [
  'app#admission:*', // the HTTP gate's own quota (default rateLimit)
  'app#send',
  'app/messagingPlugin#send',
  'global#egress',
  'app/billing#send',
  'app/messaging@%2Fv1#send',
  'app/messaging@%2Fv2#send',
  'app/messagingPlugin~1#send', // the same name again under the same parent: told apart by order
  'app/outer/messaging#send',
  'app/encapsulated-plugin#send', // an encapsulating fastify-plugin: its `name` option
  // A route's own rate limit: addressed by the registration's context and the route, not by the
  // context that declared the route (a route's METHOD and URL are unique in an app).
  'app#admission:GET%20%2Flimited'
]

t.test('two sibling plugins with the same limiter name and identity do not share quota', async (t) => {
  const clock = { now: T0 }
  const instance = await app(t, memoryBackend({ clock: () => clock.now }))
  const handles: RateLimiter[] = []
  await instance.register(async function a (child) { handles.push(child.rates.use('send', P)) })
  await instance.register(async function b (child) { handles.push(child.rates.use('send', P)) })
  // Siblings may even give the same name different policies: different scopes, no conflict.
  await instance.register(async function c (child) { handles.push(child.rates.use('send', { ...P, limit: 1 })) })
  await instance.ready()
  const [a, b, c] = handles as [RateLimiter, RateLimiter, RateLimiter]
  t.not(a, b)
  await drain(a, { tenantId: 't', userId: 'u' })
  t.notOk(await passes(a, { tenantId: 't', userId: 'u' }), 'a is out of quota')
  t.ok(await passes(b, { tenantId: 't', userId: 'u' }), 'b still has its own')
  t.ok(await passes(c, { tenantId: 't', userId: 'u' }), 'c still has its own')
  t.ok(await passes(instance.rates.use('send', P), { tenantId: 't', userId: 'u' }), 'the root has its own')
})

t.test('root, child and grandchild each have their own quota', async (t) => {
  const clock = { now: T0 }
  const instance = await app(t, memoryBackend({ clock: () => clock.now }))
  const handles: RateLimiter[] = []
  await instance.register(async function child (c) {
    handles.push(c.rates.use('send', P))
    await c.register(async function grandchild (g) { handles.push(g.rates.use('send', P)) })
  })
  await instance.ready()
  const root = instance.rates.use('send', P)
  await drain(root, 'u')
  t.ok(await passes(handles[0]!, 'u'), 'the child is not its parent')
  await drain(handles[0]!, 'v')
  t.ok(await passes(handles[1]!, 'v'), 'the grandchild is not its parent')
})

t.test('a fastify-plugin (fp) plugin shares the context it is registered in', async (t) => {
  // Observed: fp skips encapsulation, so the plugin's instance IS its parent's; onRegister does not
  // fire; it gets the parent's very `rates` and handles, and so shares the parent's quota — and a
  // different policy for a name the parent uses is a conflict.
  const clock = { now: T0 }
  const instance = await app(t, memoryBackend({ clock: () => clock.now }))
  const seen: { instance?: FastifyInstance, rates?: unknown, handle?: RateLimiter, conflict?: unknown, inChild?: RateLimiter } = {}
  const parentHandle = instance.rates.use('send', P)
  await instance.register(fp(async function shared (inst) {
    seen.instance = inst
    seen.rates = inst.rates
    seen.handle = inst.rates.use('send', P)
    seen.conflict = thrown(() => inst.rates.use('send', { ...P, limit: 3 }))
  }))
  let childHandle!: RateLimiter
  await instance.register(async function child (c) {
    childHandle = c.rates.use('send', P)
    await c.register(fp(async function sharedInChild (inst) { seen.inChild = inst.rates.use('send', P) }))
  })
  await instance.ready()
  t.equal(seen.instance, instance, 'the fp plugin runs on its parent instance')
  t.equal(seen.rates, instance.rates, 'the same rates object')
  t.equal(seen.handle, parentHandle, 'the same handle')
  t.type(seen.conflict, RatesPolicyConflictError)
  t.equal(seen.inChild, childHandle, 'inside a child, an fp plugin shares the child context')
  await drain(parentHandle)
  t.notOk(await passes(seen.handle!), 'one quota')
  t.ok(await passes(childHandle))
})

t.test('the same plugin registered under different prefixes, or twice, has different quotas', async (t) => {
  const clock = { now: T0 }
  const instance = await app(t, memoryBackend({ clock: () => clock.now }))
  const tree1 = await tree(instance)
  const distinct = [tree1.root, tree1.messaging, tree1.billing, tree1.v1, tree1.v2, tree1.messagingAgain, tree1.nested, tree1.fpEncapsulated]
  t.equal(new Set(distinct).size, distinct.length, 'eight handles')
  t.equal(tree1.viaFp, tree1.root, 'the plain fp plugin is the root')
  for (const [i, handle] of distinct.entries()) {
    await drain(handle)
    for (const other of distinct.slice(i + 1)) {
      if (!(await passes(other))) t.fail(`quota ${i} is shared with a later one`)
    }
    // The next fixed window: every quota is full again for the next round.
    clock.now += 60_000
  }
  t.pass('no two share')
  t.equal(instance.admission.stats().identities, distinct.length, 'each kept its own state for identity u')
})

t.test('addresses are structural: the same app built twice has the same addresses', async (t) => {
  const clock = { now: T0 }
  const first = memoryBackend({ clock: () => clock.now })
  const second = memoryBackend({ clock: () => clock.now })
  await tree(await app(t, first))
  await tree(await app(t, second))
  t.strictSame(addressesOf(first), EXPECTED_ADDRESSES)
  t.strictSame(addressesOf(second), addressesOf(first))
})

t.test('the same plugin in two apps on one backend (≈ two processes on one store) addresses the same quota', async (t) => {
  const clock = { now: T0 }
  const shared = memoryBackend({ clock: () => clock.now })
  const one = await tree(await app(t, shared))
  const two = await tree(await app(t, shared))
  t.not(one.messaging, two.messaging, 'handles belong to their app')
  for (const key of ['root', 'messaging', 'billing', 'v1', 'v2', 'messagingAgain', 'nested', 'fpEncapsulated', 'globalA'] as const) {
    await drain(one[key], key)
    t.notOk(await passes(two[key], key), `${key}: the other app sees the consumption`)
  }
  // Not a registration counter: other plugins registered first do not move the address.
  const three = await app(t, shared)
  await three.register(async function unrelated () {})
  await three.register(async function other (c) { c.rates.use('send', P) })
  let late!: RateLimiter
  await three.register(async function messagingPlugin (c) { late = c.rates.use('send', P) })
  await three.ready()
  t.notOk(await passes(late, 'messaging'), 'app/messagingPlugin is app/messagingPlugin, whatever came before')
  t.ok(await passes(late, 'fresh'))
  // And a conflict: the same address with another policy, across apps.
  t.throws(() => three.rates.use('send', { ...P, limit: 5 }), RatesPolicyConflictError, 'app#send already has P in the other apps')
})

t.test('rates.global shares quota across sibling plugins on purpose', async (t) => {
  const clock = { now: T0 }
  const instance = await app(t, memoryBackend({ clock: () => clock.now }))
  const egress: RatePolicy = { algorithm: 'token-bucket', limit: 1_000, windowMs: 60_000, burst: 100 }
  const handles: RateLimiter[] = []
  let own!: RateLimiter
  let sameCaller!: RateLimiter
  let sameCallerConflict: unknown
  await instance.register(async function a (child) {
    handles.push(child.rates.global.use('platform.tenant-egress', egress))
    sameCaller = child.rates.global.use('platform.tenant-egress', { ...egress })
    sameCallerConflict = thrown(() => child.rates.global.use('platform.tenant-egress', { ...egress, burst: 99 }))
    own = child.rates.use('platform.tenant-egress', { algorithm: 'fixed-window', limit: 1, windowMs: 1000 })
  })
  await instance.register(async function b (child) {
    handles.push(child.rates.global.use('platform.tenant-egress', egress))
  })
  let fromSibling: unknown
  await instance.register(async function c (child) {
    fromSibling = thrown(() => child.rates.global.use('platform.tenant-egress', { algorithm: 'gcra', limit: 1_000, windowMs: 60_000, burst: 100 }))
  })
  await instance.ready()
  const [a, b] = handles as [RateLimiter, RateLimiter]
  t.equal(sameCaller, a, 'the same caller gets the same global handle')
  t.not(a, b, 'another caller gets its own handle (its lifecycle is its own) …')
  t.type(sameCallerConflict, RatesPolicyConflictError)
  t.match(sameCallerConflict, { code: 'RATES_POLICY_CONFLICT', limiterName: 'platform.tenant-egress' })
  t.strictSame(a.policy, b.policy)
  t.equal(instance.rates.global.use('platform.tenant-egress', egress).policy.burst, 100, 'the root too')
  t.equal((await a.consume('tenant-1', { cost: 60 })).remaining, 40)
  t.strictSame(await b.consume('tenant-1', { cost: 40 }), { allowed: true, denied: false, remaining: 0, resetAt: T0 + 6000, moreAt: T0 + 60 }, '… but the same quota (a token every 60 ms)')
  t.equal((await a.consume('tenant-1')).denied, true)
  t.equal((await b.consume('tenant-2')).remaining, 99, 'per identity, as always')
  t.ok(await passes(own, 'tenant-1'), "a's own limiter of the same name is another quota, with its own policy")

  const error = thrown(() => instance.rates.global.use('platform.tenant-egress', { ...egress, limit: 999 }))
  t.type(error, RatesPolicyConflictError, 'another policy for the same global name, from another caller')
  t.match(error, { code: 'RATES_POLICY_CONFLICT' })
  t.type(fromSibling, RatesPolicyConflictError, 'from a sibling plugin too')
  t.equal(instance.rates.global.use('platform.tenant-egress', egress).policy.limit, 1_000, 'the conflict registered nothing')
})

// Guards a conflict found by the backend being reported with the limiter's name, not its backend address.
t.test('a global conflict names the limiter, not its backend address', async (t) => {
  const clock = { now: T0 }
  const instance = await app(t, memoryBackend({ clock: () => clock.now }))
  let error: unknown
  await instance.register(async function a (child) { child.rates.global.use('egress pipe', P) })
  await instance.register(async function b (child) { error = thrown(() => child.rates.global.use('egress pipe', { ...P, limit: 3 })) })
  await instance.ready()
  t.type(error, RatesPolicyConflictError)
  t.equal((error as RatesPolicyConflictError).limiterName, 'egress pipe')
  t.match((error as Error).message, /^Rate limiter "egress pipe" already has the policy/)
  t.match(error, { code: 'RATES_POLICY_CONFLICT', existing: { limit: 2 }, requested: { limit: 3 } }, "the backend's policies, kept")
})

// Guards `~` (the ordinal mark) being escaped in names and prefixes: 'a~1' is not the second 'a'.
t.test('addresses are injective: a plugin named like an ordinal is not its sibling', async (t) => {
  const clock = { now: T0 }
  const backend = memoryBackend({ clock: () => clock.now })
  const instance = await app(t, backend)
  const handles: RateLimiter[] = []
  const a = async function a (child: FastifyInstance): Promise<void> { handles.push(child.rates.use('send', P)) }
  const tilde = async function (child: FastifyInstance): Promise<void> { handles.push(child.rates.use('send', P)) }
  Object.defineProperty(tilde, 'name', { value: 'a~1' })
  await instance.register(a)
  await instance.register(a)
  await instance.register(tilde)
  const prefixed: RateLimiter[] = []
  const p = async function p (child: FastifyInstance): Promise<void> { prefixed.push(child.rates.use('send', P)) }
  await instance.register(p, { prefix: '/x' })
  await instance.register(p, { prefix: '/x' })
  await instance.register(p, { prefix: '/x~1' })
  await instance.ready()
  t.equal(addressesOf(backend).filter((address) => address.endsWith('#send')).length, 6, 'six plugins, six quotas')
  t.strictSame(addressesOf(backend).filter((address) => address.endsWith('#send')).sort(), [
    'app/a#send', 'app/a%7E1#send', 'app/a~1#send', 'app/p@%2Fx#send', 'app/p@%2Fx%7E1#send', 'app/p@%2Fx~1#send'
  ], "'~' in a name or a prefix is escaped; '~' marks only an ordinal")
  await drain(handles[1]!)
  t.ok(await passes(handles[2]!), "the plugin named 'a~1' has its own quota")
  await drain(prefixed[1]!)
  t.ok(await passes(prefixed[2]!), "the plugin under '/x~1' has its own quota")
})

// Guards contexts created before the plugin (they never passed onRegister) getting addresses of their own, not the root's.
t.test('plugins registered before admission get addresses and quotas of their own', async (t) => {
  const clock = { now: T0 }
  const backend = memoryBackend({ clock: () => clock.now })
  const instance = Fastify()
  t.teardown(() => instance.close())
  const contexts: Record<string, FastifyInstance> = {}
  await instance.register(async function early1 (child) {
    contexts.early1 = child
    await child.register(async function nested (grandchild) { contexts.nested = grandchild })
  })
  await instance.register(async function early2 (child) { contexts.early2 = child })
  await instance.register(async function twin (child) { contexts.twin1 = child })
  await instance.register(async function twin (child) { contexts.twin2 = child })
  await instance.register(admission, { backend, rateLimit: false })
  await instance.register(async function early1 (child) { contexts.late = child })
  await instance.ready()
  const handles: Record<string, RateLimiter> = {}
  for (const name of ['early1', 'early2', 'nested', 'twin1', 'twin2', 'late']) handles[name] = contexts[name]!.rates.use('send', P)
  t.equal(contexts.early1!.rates, contexts.early1!.rates, 'one rates per context')
  // early1 (before admission) asks after the early1 registered after admission was addressed at its
  // registration, so it takes the next ordinal; same-named siblings before admission are told apart
  // by the order in which they first ask (twin1 here).
  t.strictSame(addressesOf(backend).sort(), [
    'app/early1#send', // late
    'app/early1~1#send',
    'app/early1~1/nested#send', // under its parent's address
    'app/early2#send',
    'app/twin#send',
    'app/twin~1#send'
  ], 'six contexts, six quotas, addressed from their own names; none at the root')
  // Each context drains the quota of one identity (its own name); no other context, nor the root, is held back.
  for (const name of Object.keys(handles)) {
    await drain(handles[name]!, name)
    t.notOk(await passes(handles[name]!, name), `${name} drained`)
    let shared = 0
    for (const other of Object.keys(handles)) if (other !== name && !(await passes(handles[other]!, name))) shared++
    t.equal(shared, 0, `no other context shares ${name}'s quota`)
    t.ok(await passes(instance.rates.use('send', P), name), `nor does the root`)
  }
})

t.test('an anonymous plugin is addressed by its source text (observed)', async (t) => {
  // Fastify names a context by its plugin's display name, function name, or else the first two
  // lines of the function's source. The address is then structural but follows the code's text:
  // editing those lines (or transpiling differently) moves the quota.
  const clock = { now: T0 }
  const backend = memoryBackend({ clock: () => clock.now })
  const instance = await app(t, backend, { rateLimit: false })
  let inner!: FastifyInstance
  await instance.register(async (child) => { inner = child; child.rates.use('send', P) })
  await instance.ready()
  const [address] = addressesOf(backend)
  t.equal(address, `app/${encodeURIComponent(inner.pluginName)}#send`)
  t.match(inner.pluginName, /^async/, 'the function source')
})

t.test('a context from elsewhere cannot get an address', async (t) => {
  const clock = { now: T0 }
  const instance = await app(t, memoryBackend({ clock: () => clock.now }))
  await instance.ready()
  // The decorator is a getter defined on the registering context; call it on a foreign object.
  const getter = Object.getOwnPropertyDescriptor(instance, 'rates')?.get
  t.type(getter, 'function')
  t.throws(() => getter!.call({}), { code: 'RATES_INVALID_ARGUMENT', message: /a context outside it asked for an address/ })
  t.equal(getter!.call(instance), instance.rates)
})

t.test('ContextAddresses: the path of names and prefixes, siblings told apart by order', async (t) => {
  const root = {}
  const addresses = new ContextAddresses(root)
  const child = Object.create(root) as object
  const unnamed = Object.create(root) as object
  const again = Object.create(root) as object
  t.equal(addresses.register(child, 'a b', '/v1'), 'app/a%20b@%2Fv1')
  t.equal(addresses.register(unnamed, undefined, undefined), 'app/anonymous', 'no name: anonymous')
  t.equal(addresses.register(again, undefined, ''), 'app/anonymous~1', 'an empty prefix is no prefix')
  // An unseen context (created before the plugin) is addressed when it first asks, under its parent.
  const unseen = Object.create(child) as object
  t.equal(addresses.of(unseen), 'app/a%20b@%2Fv1/anonymous', 'an unseen context: addressed now, under its parent')
  t.equal(addresses.of(unseen), 'app/a%20b@%2Fv1/anonymous', 'and remembered')
  t.equal(addresses.of(Object.create(child) as object), 'app/a%20b@%2Fv1/anonymous~1', 'its unseen sibling: the next ordinal')
  const named = Object.assign(Object.create(Object.create(child) as object) as object, { pluginName: 'x~y', prefix: '/p~' })
  t.equal(addresses.of(named), 'app/a%20b@%2Fv1/anonymous~2/x%7Ey@%2Fp%7E', "its own name and prefix, '~' escaped; an unseen parent too")
  t.equal(addresses.register(Object.create(root) as object, 'a~1', '/x~1'), 'app/a%7E1@%2Fx%7E1')
  t.equal(new ContextAddresses(root, 'elsewhere').of(root), 'elsewhere')
})
