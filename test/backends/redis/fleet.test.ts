// A fleet-wide in-flight limit (maxInFlight: { fleet }) on a real Redis: every live process of the
// fleet enforces its share, the shares add up to the limit and rebalance as processes join, leave
// or die (an entry that stops being renewed lapses after its TTL); the share is a local limit (no
// Redis call per request); the adaptive limit and the critical reserve compose with it. Processes
// are apps in this process, each with a backend of its own, as separate processes would have.
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import type { Redis } from 'ioredis'
import admission, { redisBackend, type AdmissionOptions, type RatesBackend } from '../../../lib/index.js'
import { deferred } from '../../helpers/http.js'
import { counting, deleteKeys, sharedRedis, uniquePrefix, until } from './helpers.js'

const shared = await sharedRedis()
const skip = 'skip' in shared ? shared.skip : false
const redis = 'redis' in shared ? shared.redis : (undefined as unknown as Redis)
if (!skip) t.teardown(() => redis.quit())

const REFRESH = 50

async function member (t: Test, prefix: string, maxInFlight: AdmissionOptions['maxInFlight'], backend?: RatesBackend, extra: AdmissionOptions = {}): Promise<FastifyInstance> {
  const app = Fastify()
  await app.register(admission, { backend: backend ?? redisBackend({ client: redis, prefix, timeoutMs: 2000 }), rateLimit: false, maxInFlight, ...extra })
  app.get('/', async () => 'ok')
  await app.ready()
  t.teardown(() => app.close())
  return app
}

const limits = (apps: FastifyInstance[]): Array<number | false> => apps.map((app) => app.admission.limit)
const sum = (apps: FastifyInstance[]): number => limits(apps).reduce<number>((a, b) => a + (b === false ? 0 : b), 0)

t.test('shares add up to the limit and rebalance as members join and leave', { skip }, async (t) => {
  const prefix = uniquePrefix('fleet')
  t.teardown(() => deleteKeys(redis, prefix))
  const fleet = { fleet: 10, refreshMs: REFRESH }
  const first = await member(t, prefix, fleet)
  t.equal(first.admission.limit, 10, 'alone, after its first refresh (awaited at ready): the whole limit')
  const apps = [first, await member(t, prefix, fleet), await member(t, prefix, fleet)]
  await until(() => sum(apps) === 10 && limits(apps).every((l) => l === 3 || l === 4))
  t.same(limits(apps).sort(), [3, 3, 4], 'three members: 4, 3 and 3')
  await apps.pop()!.close()
  await until(() => limits(apps).every((l) => l === 5))
  t.same(limits(apps), [5, 5], 'one left (its entry removed at close): the others take its share at their next refresh')
})

t.test('a member that dies (stops renewing) lapses after its TTL; the others take its share', { skip }, async (t) => {
  const prefix = uniquePrefix('fleet-die')
  t.teardown(() => deleteKeys(redis, prefix))
  const app = await member(t, prefix, { fleet: 9, refreshMs: REFRESH })
  // A member renewed once and never again, at the same fleet (the registration's address): a
  // process killed without closing.
  const ghostBackend = redisBackend({ client: redis, prefix, timeoutMs: 2000 })
  const address = app.admission.address
  await ghostBackend.fleet!(address, 3 * REFRESH).refresh()
  await until(() => app.admission.limit === 4 || app.admission.limit === 5)
  await until(() => app.admission.limit === 9)
  t.pass(`back to the whole limit once the ghost's entry lapsed (its TTL ${3 * REFRESH} ms)`)
})

t.test('the share is a local limit: requests beyond it are shed, with no Redis call per request', { skip }, async (t) => {
  const prefix = uniquePrefix('fleet-shed')
  t.teardown(() => deleteKeys(redis, prefix))
  const client = counting(redis)
  const backend = redisBackend({ client, prefix, timeoutMs: 2000 })
  const app = Fastify()
  const release = deferred()
  await app.register(admission, { backend, rateLimit: false, maxInFlight: { fleet: 2, refreshMs: 60_000 } })
  app.get('/slow', async () => { await release.promise; return 'done' })
  await app.ready()
  t.teardown(() => app.close())
  const calls = client.calls.eval + client.calls.evalsha
  // inject() starts a request only once it is awaited (then-ed).
  const held = [app.inject('/slow').then((r) => r), app.inject('/slow').then((r) => r)]
  await until(() => app.admission.stats().inFlight === 2)
  const shed = await app.inject('/slow')
  t.equal(shed.statusCode, 503, 'the third is shed: the share is 2')
  t.equal(app.admission.stats().reasons['fleet-in-flight'], 1, 'by the fleet\'s share')
  t.ok(Number(shed.headers['retry-after']) >= 1)
  release.resolve()
  t.same((await Promise.all(held)).map((r) => r.statusCode), [200, 200])
  t.equal(client.calls.eval + client.calls.evalsha, calls, 'no Redis call for any of the requests')
})

t.test('the adaptive limit composes: the smaller of it and the share', { skip }, async (t) => {
  const prefix = uniquePrefix('fleet-adaptive')
  t.teardown(() => deleteKeys(redis, prefix))
  const app = await member(t, prefix, { fleet: 400, refreshMs: REFRESH, adaptive: true, initial: 20 })
  t.equal(app.admission.limit, 20, 'the adaptive limit (20) below the share (400)')
  const small = await member(t, uniquePrefix('fleet-adaptive-small'), { fleet: 5, refreshMs: REFRESH, adaptive: true, initial: 20 })
  t.equal(small.admission.limit, 5, 'the share (5) below the adaptive limit')
})

t.test('Redis unreachable at start: one slot until the fleet is known, a warning logged once', async (t) => {
  const lines: Array<{ msg: string }> = []
  const client = { evalsha: async () => { throw new Error('connection refused') }, eval: async () => { throw new Error('connection refused') } }
  const app = Fastify({ logger: { level: 'warn', stream: { write: (line: string) => { lines.push(JSON.parse(line) as { msg: string }) } } } })
  await app.register(admission, { backend: redisBackend({ client, timeoutMs: 100 }), rateLimit: false, maxInFlight: { fleet: 50, refreshMs: REFRESH } })
  app.get('/', async () => 'ok')
  await app.ready()
  t.equal(app.admission.limit, 1, 'a process that does not know its fleet takes one slot, not the whole limit')
  await new Promise((resolve) => setTimeout(resolve, 4 * REFRESH))
  t.equal(lines.filter((line) => /fleet's membership could not be refreshed/.test(line.msg)).length, 1, 'logged once until it works')
  await app.close()
  t.ok(lines.some((line) => /could not leave the fleet/.test(line.msg)), 'leaving failed too: its entry lapses with its TTL')
})

t.test('without Redis: an adaptive fleet limit holds one slot; closing during a refresh waits for no timer', async (t) => {
  let calls = 0
  // The first call (the refresh at ready) fails at once, the second (the next refresh) never
  // answers (the backend's timer ends it), the third (leaving, at close) works.
  const answer = async (): Promise<unknown> => {
    calls++
    if (calls === 1) throw new Error('connection refused')
    if (calls === 2) return new Promise<never>(() => {})
    return [1, 0]
  }
  const client = { evalsha: answer, eval: answer }
  const app = Fastify({ logger: { level: 'error' } })
  // A timeout far above the wait below: the refresh is still in flight when the app closes.
  await app.register(admission, { backend: redisBackend({ client, timeoutMs: 1000 }), rateLimit: false, maxInFlight: { fleet: 50, refreshMs: REFRESH, adaptive: true, initial: 4 } })
  app.get('/', async () => 'ok')
  await app.ready()
  t.equal(app.admission.limit, 1, 'the smaller of the adaptive limit (4) and the share before the fleet is known (1)')
  while (calls < 2) await new Promise((resolve) => setTimeout(resolve, 5))
  // The second refresh is in flight (its timer already fired): close now.
  await app.close()
  t.equal(calls, 3, 'and left the fleet')
})

t.test('a backend without fleets, and bad fleet options, are refused at registration', async (t) => {
  const register = async (maxInFlight: unknown): Promise<unknown> => {
    const app = Fastify()
    t.teardown(() => app.close())
    return app.register(admission, { maxInFlight: maxInFlight as AdmissionOptions['maxInFlight'] }).ready().then(() => undefined, (error: unknown) => error)
  }
  t.match(await register({ fleet: 10 }), { code: 'ADMISSION_INVALID_OPTION', message: /maxInFlight\.fleet.*redisBackend.*the "memory" backend has no fleet/ })
  t.match(await register({ fleet: 0 }), { message: /maxInFlight\.fleet.*positive safe integer/ })
  t.match(await register({ fleet: 10, refreshMs: 10 }), { message: /maxInFlight\.refreshMs.*from 50 to 60000/ })
  t.match(await register({ fleet: 10, refreshMs: 100.5 }), { message: /maxInFlight\.refreshMs/ })
  t.match(await register({ fleet: 10, initial: 5 }), { message: /maxInFlight\.adaptive.*true with the adaptive options \(initial\)/ })
  t.match(await register({ fleet: 10, adaptive: false }), { message: /maxInFlight\.adaptive/ })
  t.match(await register({ fleet: 10, flet: 1 }), { message: /maxInFlight/ })
})

t.test('the fleet script with a scripted client: an unexpected reply, a stopped backend; a refresh that fails after one worked keeps the share', async (t) => {
  const replies: unknown[] = []
  const client = { evalsha: async () => null, eval: async () => { const next = replies.shift(); if (next instanceof Error) throw next; return next } }
  const backend = redisBackend({ client, timeoutMs: 200 })
  const fleet = backend.fleet!('app', 150)
  replies.push([2, 1, 10, 10], [2, 2, 10, 10], [0, 0])
  t.same(await fleet.refresh(), { members: 2, rank: 1, least: 10, most: 10 })
  t.match(await fleet.refresh().catch((e: unknown) => e), { code: 'RATES_UNAVAILABLE', message: /unexpected reply from the fleet script/ })
  await fleet.leave()
  await backend.stop()
  t.match(await fleet.refresh().catch((e: unknown) => e), { code: 'RATES_STOPPED' })
  await fleet.leave()
  t.throws(() => backend.fleet!('app', 150), { code: 'RATES_STOPPED' })

  // An app whose first refresh worked (share 5 of 10) and whose next ones fail: it keeps 5.
  const lines: Array<{ msg: string }> = []
  const later: unknown[] = [[2, 0, 10, 10]]
  const flaky = { evalsha: async () => null, eval: async () => { const next = later.shift(); if (next === undefined) throw new Error('gone'); return next } }
  const app = Fastify({ logger: { level: 'warn', stream: { write: (line: string) => { lines.push(JSON.parse(line) as { msg: string }) } } } })
  await app.register(admission, { backend: redisBackend({ client: flaky, timeoutMs: 100 }), rateLimit: false, maxInFlight: { fleet: 10, refreshMs: REFRESH } })
  await app.ready()
  t.equal(app.admission.limit, 5)
  await until(() => lines.some((line) => /keeps its share of 5 in flight/.test(line.msg)))
  t.equal(app.admission.limit, 5, 'the last share stands while Redis cannot answer')
  await app.close()
})

/** An app in a fleet whose every refresh answers `view.now` (a scripted client: no Redis needed). */
async function scripted (t: Test, fleet: number, view: { now: unknown[] }, lines: Array<{ msg: string }> = []): Promise<FastifyInstance> {
  const client = { evalsha: async () => null, eval: async () => view.now }
  const app = Fastify({ logger: { level: 'warn', stream: { write: (line: string) => { lines.push(JSON.parse(line) as { msg: string }) } } } })
  t.teardown(() => app.close())
  await app.register(admission, { backend: redisBackend({ client, timeoutMs: 100 }), rateLimit: false, maxInFlight: { fleet, refreshMs: REFRESH } })
  await app.ready()
  return app
}

t.test('after Redis restarts empty, a member that renews first keeps its share until the others could renew', async (t) => {
  // Regression: the first member to renew saw itself alone and took the whole limit at once while
  // the other nine kept theirs: 15 running at once for a fleet limit of 8.
  const view = { now: [10, 3, 8, 8] as unknown[] }
  const app = await scripted(t, 8, view)
  t.equal(app.admission.limit, 1, 'one of ten members: its share of 8 is one slot')
  view.now = [1, 0, 8, 8]
  const ttl = 3 * REFRESH
  const shrunk = Date.now()
  await new Promise((resolve) => setTimeout(resolve, 2 * REFRESH))
  t.equal(app.admission.limit, 1, 'alone in the view, but the others\' entries have not lapsed: kept')
  await until(() => app.admission.limit === 8)
  t.ok(Date.now() - shrunk >= ttl, `the whole limit only once a TTL (${ttl} ms) has passed since the shrink`)
})

t.test('members registered with different limits at one address each take their share of the least, and say so once', async (t) => {
  const lines: Array<{ msg: string }> = []
  const app = await scripted(t, 100, { now: [2, 1, 4, 100] }, lines)
  t.equal(app.admission.limit, 2, 'half of 4, not half of 100')
  const unsaid = await scripted(t, 10, { now: [2, 0, 0, 0] })
  t.equal(unsaid.admission.limit, 5, 'members that say no limit (an older version): its own')
  await new Promise((resolve) => setTimeout(resolve, 3 * REFRESH))
  t.equal(lines.filter((line) => /registered with different limits \(from 4 to 100\)/.test(line.msg)).length, 1)
})

t.test('on a real Redis: two registrations of one address with limits 4 and 100 share 4', { skip }, async (t) => {
  const prefix = uniquePrefix('fleet-limits')
  t.teardown(() => deleteKeys(redis, prefix))
  const small = await member(t, prefix, { fleet: 4, refreshMs: REFRESH })
  const large = await member(t, prefix, { fleet: 100, refreshMs: REFRESH })
  await until(() => sum([small, large]) === 4)
  t.same(limits([small, large]).sort(), [2, 2], 'shares of the least limit')
})
