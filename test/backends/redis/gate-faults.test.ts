// The HTTP gate on Redis under faults, each on a redis-server of its own (free port, debug
// commands enabled, killed by its pid at teardown): killed mid-traffic, paused (CLIENT PAUSE),
// slowed (DEBUG SLEEP). Every request is answered as the configured policy says (503 +
// Retry-After by default, admitted and counted with onBackendError 'allow'), never an error or a
// hang; while Redis cannot answer, it is the backend's timer that ends each decision; and
// decisions resume once Redis is back, without restarting the app. Then the deny cache seen from
// HTTP: no round trip while a denial is certain, the Retry-After a cache-less app gives.
//
// Nothing here is a bound on wall-clock latency (a busy machine would break it): what happened
// during a fault is told by order — the probes are sent once the fault is in effect and answered
// before it ends — and by the client's own state (its call for the probe still pending when the
// 503 came: the timer, not the network, ended it). The faults last many timeouts long.
import { Agent } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import Fastify, { type FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import type { Redis } from 'ioredis'
import { admission, redisBackend } from '../../../lib/index.js'
import type { GateCounters } from '../../../lib/gate/stats.js'
import { newCounters } from '../../../lib/gate/stats.js'
import { counting, redisServerMissing, startPrivateServer, testClient, timedGet, until, type Counted, type PrivateServer, type Timed } from './helpers.js'

const skip = await redisServerMissing()
/** The backend's timeout: ample for a loopback round trip on a busy machine. */
const TIMEOUT_MS = 250
/** How long a pause or a sleep lasts: eight timeouts. */
const FAULT_MS = 2000
/** Requests sent while a fault is in effect. */
const PROBES = 10
const LIMIT = 3
const ROUTE = 'GET /stream'
const SERVER_ARGS = ['--enable-debug-command', 'local']

interface Rig {
  app: FastifyInstance
  port: number
  redis: Redis
  /** The app's client, as the backend sees it: counts its calls and knows which still wait. */
  client: Counted
  /** The private server; replaced by `restart()`. */
  server: PrivateServer
  restart (): Promise<void>
}

/**
 * A private server, a client, and an app whose gate runs on them: `LIMIT` per hour per `x-id`
 * (so a request with a fresh identity is admitted while Redis answers).
 */
async function rig (t: Test, options: { onBackendError?: 'deny' | 'allow' } = {}): Promise<Rig> {
  const state = { server: await startPrivateServer(SERVER_ARGS) }
  t.teardown(async () => { await state.server.stop() })
  const redis = testClient(state.server.url)
  redis.on('error', () => { /* reconnecting: the backend reports it as RATES_UNAVAILABLE */ })
  await redis.connect()
  t.teardown(() => { redis.disconnect() })
  const client = counting(redis)
  const app = Fastify()
  await app.register(admission, {
    backend: redisBackend({ client, timeoutMs: TIMEOUT_MS }),
    rateLimit: { algorithm: 'token-bucket', limit: LIMIT, windowMs: 3_600_000 },
    key: (request) => String(request.headers['x-id'] ?? 'anonymous'),
    ...(options.onBackendError === undefined ? {} : { onBackendError: options.onBackendError })
  })
  app.get('/stream', async () => 'ok')
  await app.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => app.close())
  const port = (app.server.address() as AddressInfo).port
  // Warm the paths (first decision loads the script; first refusals build their replies).
  for (let i = 0; i < 3; i++) await timedGet(port, '/stream', { 'x-id': `warm-${i}` })
  return {
    app,
    port,
    redis,
    client,
    get server () { return state.server },
    async restart () {
      state.server = await startPrivateServer(SERVER_ARGS, state.server.port)
    }
  }
}

/** A steady stream across the fault: one GET every `intervalMs`, each with an identity of its own. */
function stream (port: number, label: string, intervalMs = 20): { stop (): Promise<Timed[]> } {
  const agent = new Agent({ keepAlive: true })
  const pending: Array<Promise<Timed>> = []
  const timer = setInterval(() => {
    pending.push(timedGet(port, '/stream', { 'x-id': `${label}-${pending.length}` }, agent))
  }, intervalMs)
  return {
    async stop () {
      clearInterval(timer)
      const answers = await Promise.all(pending)
      agent.destroy()
      return answers
    }
  }
}

interface Probe extends Timed {
  /** When the answer came: the client's call for this identity had not settled. */
  readonly callPending: boolean
  /** When the answer came: the fault had not ended yet. */
  readonly duringFault: boolean
}

/** One GET with its own identity, and what held when its answer came. */
async function probe (r: Rig, identity: string, faultOver: () => boolean = () => true): Promise<Probe> {
  const answer = await timedGet(r.port, '/stream', { 'x-id': identity })
  const calls = r.client.log.filter((entry) => entry.key.endsWith(`:${identity}}`))
  return { ...answer, callPending: calls.length > 0 && calls.every((entry) => !entry.settled), duringFault: !faultOver() }
}

function delta (after: GateCounters | undefined, before: GateCounters | undefined): Pick<GateCounters, 'admitted' | 'limited' | 'shed' | 'unavailable'> {
  const a = after ?? newCounters()
  const b = before ?? newCounters()
  return { admitted: a.admitted - b.admitted, limited: a.limited - b.limited, shed: a.shed - b.shed, unavailable: a.unavailable - b.unavailable }
}

/** Each 503 has Retry-After: a whole number of seconds ≥ 1. */
function retryAfterOn503 (t: Test, answers: Timed[], what: string): void {
  const bad = answers.filter((a) => a.status === 503 && !/^[1-9][0-9]*$/.test(a.retryAfter ?? '')).map((a) => a.retryAfter)
  t.same(bad, [], `${what}: every 503 carries Retry-After (whole seconds ≥ 1)`)
}

/** Waits until the app's own client talks to a server again (same instance, reconnected). */
async function reconnected (t: Test, r: Rig): Promise<void> {
  await until(() => r.redis.status === 'ready')
  t.equal(await r.redis.ping(), 'PONG', 'the app\'s own client reconnected (same instance)')
}

/** After an outage: `LIMIT` admitted, then 429 — real decisions, on the same app and client. */
async function decisionsResume (t: Test, port: number, identity: string): Promise<void> {
  const statuses: number[] = []
  let retryAfter: string | undefined
  for (let i = 0; i <= LIMIT; i++) {
    const answer = await timedGet(port, '/stream', { 'x-id': identity })
    statuses.push(answer.status)
    retryAfter = answer.retryAfter
  }
  t.same(statuses, [...Array.from({ length: LIMIT }, () => 200), 429], `decisions resume without a restart: ${LIMIT} × 200, then 429`)
  t.ok(Number(retryAfter) > 60, `the 429's Retry-After is the quota's (a token per 1200 s): ${retryAfter} s`)
}

interface Fault {
  /** Settles when the fault has ended (by itself, or by `end`). */
  readonly over: Promise<unknown>
  /** Ends it (or waits for it to end), then for the app's client to talk to Redis again. */
  end (): Promise<void>
  /**
   * It ends by itself, and Redis holds every call while it lasts, so only the backend's timer can
   * end a decision (a killed server is down until `end`; its client fails calls by itself).
   */
  readonly silent: boolean
}

/**
 * Requests across a fault under the default policy ('deny'): before it, all 200; the probes sent
 * once it is in effect, all 503 + Retry-After, answered before it ends (and, when Redis is silent,
 * by the timer); after it, all 200 again; a stream across both edges only ever 200 or 503; all
 * counted in stats.
 */
async function across (t: Test, r: Rig, label: string, begin: () => Promise<Fault>): Promise<void> {
  const before = r.app.admission.stats()
  const flow = stream(r.port, label)
  const pre: Probe[] = []
  for (let i = 0; i < 5; i++) pre.push(await probe(r, `${label}-before-${i}`))
  t.same(pre.map((a) => a.status), [200, 200, 200, 200, 200], 'before the fault: 200')

  const fault = await begin()
  let over = false
  void fault.over.then(() => { over = true }, () => { over = true })
  const during = await Promise.all(Array.from({ length: PROBES }, (_, i) => probe(r, `${label}-down-${i}`, () => over)))
  t.same(during.map((a) => a.status), during.map(() => 503), `during the fault: ${PROBES} × 503 (fail closed, the default)`)
  retryAfterOn503(t, during, 'during the fault')
  if (fault.silent) {
    // A pause or a sleep ends by itself: every probe must have been answered before that.
    t.same(during.filter((a) => !a.duringFault).length, 0, 'each answered while the fault still lasted')
    t.same(during.filter((a) => !a.callPending).length, 0, 'each ended by the backend\'s timer: the client still waited for Redis')
  }

  await fault.end()
  await reconnected(t, r)
  const post: Probe[] = []
  for (let i = 0; i < 5; i++) post.push(await probe(r, `${label}-after-${i}`))
  t.same(post.map((a) => a.status), [200, 200, 200, 200, 200], 'after it: 200 again')

  const streamed = await flow.stop()
  t.same(streamed.filter((a) => a.status !== 200 && a.status !== 503).map((a) => `${a.status} ${a.error ?? ''}`), [],
    `the stream across it (${streamed.length} requests): every one answered by the policy, 200 or 503, never an error or a hang`)
  retryAfterOn503(t, streamed, 'the stream')
  const all = [...pre, ...during, ...post, ...streamed]
  const count = (status: number): number => all.filter((a) => a.status === status).length
  const after = r.app.admission.stats()
  const expected = { admitted: count(200), limited: 0, shed: 0, unavailable: count(503) }
  t.same(delta(after, before), expected, `stats: each 503 counted as unavailable (${count(503)}), not as shed (the in-flight gate's)`)
  t.same(delta(after.routes[ROUTE], before.routes[ROUTE]), expected, `stats of ${ROUTE}: the same`)
  await decisionsResume(t, r.port, `${label}-resumed`)
}

t.test('killed mid-traffic: 503 + Retry-After; restarted on its port, decisions resume', { skip }, async (t) => {
  const r = await rig(t)
  await across(t, r, 'killed', async () => {
    await r.server.stop()
    let restarted!: () => void
    const over = new Promise<void>((resolve) => { restarted = resolve })
    // Down until the probes are answered; ioredis retries every 50 ms, so it then reconnects.
    return { over, silent: false, async end () { await r.restart(); restarted() } }
  })
})

t.test(`paused (CLIENT PAUSE ${FAULT_MS} ALL): 503 + Retry-After by the backend's timer, then decisions resume`, { skip }, async (t) => {
  const r = await rig(t)
  await across(t, r, 'paused', async () => {
    // In effect once OK comes back. ALL pauses the admin connection too: its PING is answered
    // when the pause really ends.
    t.equal(await r.server.admin.client('PAUSE', FAULT_MS, 'ALL'), 'OK')
    const over = r.server.admin.ping()
    return { over, silent: true, async end () { t.equal(await over, 'PONG') } }
  })
})

t.test(`slowed (DEBUG SLEEP ${FAULT_MS / 1000}): 503 + Retry-After by the backend's timer, then decisions resume`, { skip }, async (t) => {
  const r = await rig(t)
  await across(t, r, 'slowed', async () => {
    // Sent on the app's own connection, so every decision sent after it reaches the server after
    // the sleep began (one connection is one ordered stream); the whole server sleeps, and the
    // reply comes when it wakes up.
    const over = r.redis.call('DEBUG', 'SLEEP', String(FAULT_MS / 1000))
    return { over, silent: true, async end () { t.equal(await over, 'OK') } }
  })
})

t.test("onBackendError 'allow': during the outage every request is admitted and counted as unavailable", { skip }, async (t) => {
  const r = await rig(t, { onBackendError: 'allow' })
  const before = r.app.admission.stats()
  t.same(delta(before, undefined), { admitted: 3, limited: 0, shed: 0, unavailable: 0 }, 'warm-up: decided by Redis')

  await r.server.stop()
  const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => probe(r, `allowed-${i}`)))
  const during = r.app.admission.stats()
  t.same(answers.filter((a) => a.status !== 200).map((a) => `${a.status} ${a.error ?? ''}`), [], 'all 20 admitted (200) while Redis is down')
  const expected = { admitted: 20, limited: 0, shed: 0, unavailable: 20 }
  t.same(delta(during, before), expected, 'stats: every one of the 20 counted as unavailable (never silently)')
  t.same(delta(during.routes[ROUTE], before.routes[ROUTE]), expected, `stats of ${ROUTE}: the same`)

  await r.restart()
  await reconnected(t, r)
  const back = r.app.admission.stats()
  await decisionsResume(t, r.port, 'allowed-after')
  const after = r.app.admission.stats()
  t.same(delta(after, back), { admitted: LIMIT, limited: 1, shed: 0, unavailable: 0 }, 'with Redis back: decided by Redis, nothing unavailable')
})

/** Calls of EVALSHA and EVAL the server executed (INFO commandstats). */
async function scriptCalls (server: PrivateServer): Promise<number> {
  const info = await server.admin.info('commandstats')
  let calls = 0
  for (const match of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) calls += Number(match[1])
  return calls
}

t.test('deny cache at the gate: no round trip while the denial is certain, the Retry-After a cache-less app gives', { skip }, async (t) => {
  const server = await startPrivateServer()
  t.teardown(server.stop)
  const redis = testClient(server.url)
  await redis.connect()
  t.teardown(() => { redis.disconnect() })
  // Two apps on the same server, each under a prefix of its own, fed the same requests: one with
  // the deny cache (the default), one without. The timeout is generous: this is not about latency.
  const cachedClient = counting(redis)
  const plainClient = counting(redis)
  const apps = await Promise.all([
    redisBackend({ client: cachedClient, prefix: 'cached:', timeoutMs: 2000 }),
    redisBackend({ client: plainClient, prefix: 'plain:', timeoutMs: 2000, denyCache: false })
  ].map(async (backend) => {
    const app = Fastify()
    // A token every 10 s; on /short, a token every second.
    await app.register(admission, { backend, rateLimit: { algorithm: 'token-bucket', limit: 3, windowMs: 30_000 }, key: () => 'x' })
    app.get('/', async () => 'ok')
    app.get('/short', { config: { admission: { rateLimit: { algorithm: 'token-bucket', limit: 2, windowMs: 2000 } } } }, async () => 'ok')
    await app.listen({ port: 0, host: '127.0.0.1' })
    t.teardown(() => app.close())
    return { app, port: (app.server.address() as AddressInfo).port }
  }))
  const [cached, plain] = apps as [typeof apps[0], typeof apps[0]]
  const calls = (client: typeof cachedClient): number => client.calls.evalsha + client.calls.eval
  /** The same request to both apps; their answers. */
  const both = async (path: string): Promise<[Timed, Timed]> =>
    [await timedGet(cached.port, path), await timedGet(plain.port, path)]
  const parts = (a: Timed): { r: string, t: number } => {
    const match = /r=(\d+);t=(\d+)/.exec(String(a.headers.ratelimit)) ?? []
    return { r: match[1] ?? '?', t: Number(match[2]) }
  }

  const statuses: Array<[number, number]> = []
  for (let i = 0; i < 4; i++) statuses.push((await both('/')).map((a) => a.status) as [number, number])
  t.same(statuses, [[200, 200], [200, 200], [200, 200], [429, 429]], 'both apps: 3 admitted, then denied by Redis')
  t.same(cachedClient.calls, { evalsha: 4, eval: 1 }, 'the first denial came from Redis (a round trip; on a new server the first call loads the script by EVAL)')

  const server0 = await scriptCalls(server)
  const cached0 = calls(cachedClient)
  const plain0 = calls(plainClient)
  const pairs: Array<[Timed, Timed]> = []
  for (let i = 0; i < 10; i++) pairs.push(await both('/'))
  t.same(pairs.map(([c, p]) => [c.status, p.status]), pairs.map(() => [429, 429]), 'within the wait: 429 from both')
  t.equal(calls(cachedClient) - cached0, 0, 'the cached app made no round trip (client spy: no EVALSHA, no EVAL)')
  t.equal(calls(plainClient) - plain0, 10, 'the cache-less app made one per request')
  t.equal(await scriptCalls(server) - server0, 10, 'the server ran the script 10 times (INFO commandstats): the cache-less app\'s only')
  const retries = pairs.map(([c, p]) => [Number(c.retryAfter), Number(p.retryAfter)])
  t.ok(retries.every(([c, p]) => (c as number) >= 1 && Math.abs((c as number) - (p as number)) <= 1),
    `Retry-After: cached and cache-less agree within 1 s: ${retries.map(([c, p]) => `${c}/${p}`).join(' ')}`)
  t.ok(retries.every(([c, p]) => (c as number) >= (p as number)), 'the cached Retry-After is never earlier')
  t.ok(pairs.every(([c, p]) => parts(c).r === parts(p).r && Math.abs(parts(c).t - parts(p).t) <= 1),
    `RateLimit header: the same remaining, reset within 1 s (${String(pairs[0]?.[0].headers.ratelimit)} / ${String(pairs[0]?.[1].headers.ratelimit)})`)
  t.same(delta(cached.app.admission.stats(), undefined), delta(plain.app.admission.stats(), undefined), 'both apps counted the same')
  t.same(delta(cached.app.admission.stats(), undefined), { admitted: 3, limited: 11, shed: 0, unavailable: 0 })

  // The cache denies only until the wait is over: then Redis decides again.
  const short: Array<[number, number]> = []
  for (let i = 0; i < 3; i++) short.push((await both('/short')).map((a) => a.status) as [number, number])
  t.same(short, [[200, 200], [200, 200], [429, 429]], '/short: 2 admitted, then denied by Redis')
  const deniedAt = performance.now()
  const cached1 = calls(cachedClient)
  t.same((await both('/short')).map((a) => a.status), [429, 429], 'at once: still denied')
  t.equal(calls(cachedClient) - cached1, 0, '… locally')
  // A token comes at most 1000 ms after the denial: wait a little longer (a lower bound only).
  await sleep(Math.max(0, deniedAt + 1100 - performance.now()))
  t.same((await both('/short')).map((a) => a.status), [200, 200], 'a token later (1000 ms): both admit')
  t.equal(calls(cachedClient) - cached1, 1, 'the cached app asked Redis again once the wait was over')
})
