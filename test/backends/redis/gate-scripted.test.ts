// The HTTP gate on the Redis backend with a scripted client: no server, so it runs everywhere
// (it is what covers the gate's round-trip path when no Redis is installed). Each reply is the
// one the decision script gives; the gate must turn it into the answer the policy says: admitted
// with the RateLimit headers Redis's numbers give, 429 with Retry-After, 503 when the backend
// cannot decide — a policy conflict included — (or admitted with onBackendError 'allow'), counted
// in stats, the in-flight slot given back every time.
import Fastify, { type FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import { admission, redisBackend, type AdmissionStats } from '../../../lib/index.js'
import type { GateCounters } from '../../../lib/gate/stats.js'
import type { RedisScriptClient } from '../../../lib/backends/redis/redis-backend.js'
import { DECIDE_SHA } from '../../../lib/backends/redis/decide-script.js'

type Reply = () => Promise<unknown>

interface Scripted extends RedisScriptClient {
  /** Each EVALSHA's key and arguments after it. */
  readonly sent: string[][]
  /** The replies still to give, one per call (EVALSHA or EVAL). */
  readonly replies: Reply[]
}

function scripted (): Scripted {
  const sent: string[][] = []
  const replies: Reply[] = []
  const next = (): Promise<unknown> => {
    const reply = replies.shift()
    if (reply === undefined) return Promise.reject(new Error('the test scripted no reply for this call'))
    return reply()
  }
  return {
    sent,
    replies,
    evalsha (sha, numKeys, ...rest) {
      sent.push([sha, String(numKeys), ...rest])
      return next()
    },
    eval () { return next() }
  }
}

const POLICY = { algorithm: 'fixed-window', limit: 5, windowMs: 60_000 } as const

async function gate (t: Test, client: Scripted, options: { onBackendError?: 'allow' | 'deny', timeoutMs?: number } = {}): Promise<{ app: FastifyInstance, limits: number[], sheds: number[] }> {
  const limits: number[] = []
  const sheds: number[] = []
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, {
    backend: redisBackend({ client, timeoutMs: options.timeoutMs ?? 10_000, denyCache: false }),
    rateLimit: POLICY,
    maxInFlight: 10,
    key: (request) => String(request.headers['x-id']),
    onLimit: (_request, retryAfterMs) => { limits.push(retryAfterMs) },
    onShed: () => { sheds.push(1) },
    ...(options.onBackendError === undefined ? {} : { onBackendError: options.onBackendError })
  })
  app.get('/', async () => 'ok')
  await app.ready()
  return { app, limits, sheds }
}

const fields = ({ admitted, limited, shed, unavailable, inFlight }: GateCounters): GateCounters =>
  ({ admitted, limited, shed, unavailable, inFlight }) as GateCounters

const counters = (stats: AdmissionStats): unknown => ({ ...fields(stats), route: fields(stats.routes['GET /']!) })

/** `"default";r=…;t=…` → its parts. */
const rateLimitOf = (header: unknown): { r: number, t: number } => {
  const match = /^"default";r=(\d+);t=(\d+)$/.exec(String(header))
  return { r: Number(match?.[1]), t: Number(match?.[2]) }
}

t.test('admitted by Redis: one EVALSHA for the identity, headers from the reply, the slot given back', async (t) => {
  const client = scripted()
  const { app } = await gate(t, client)
  const resetAt = Date.now() + 42_000
  // A fixed window: more comes when it ends (moreAt), which is also its full capacity.
  const moreAt = resetAt
  client.replies.push(async () => [0, 1, 3, 0, resetAt, resetAt - 42_000, moreAt])
  const before = Date.now()
  const res = await app.inject({ url: '/', headers: { 'x-id': 'alice' } })
  const after = Date.now()
  t.equal(res.statusCode, 200)
  t.equal(res.body, 'ok')
  t.same(client.sent, [[DECIDE_SHA, '1', 'admission:{app#admission:*:alice}', 'fixed-window:5:60000', '1']], 'the plugin quota, the identity, cost 1')
  t.equal(res.headers['ratelimit-policy'], '"default";q=5;w=60')
  const header = rateLimitOf(res.headers.ratelimit)
  t.equal(header.r, 3, 'remaining as Redis said')
  // Seconds until Redis's moreAt, on this process's clock when the header was written.
  t.ok(header.t >= Math.ceil((moreAt - after) / 1000) && header.t <= Math.ceil((moreAt - before) / 1000), `t=${header.t} is moreAt - now`)
  const one = { admitted: 1, limited: 0, shed: 0, unavailable: 0, inFlight: 0 }
  t.same(counters(app.admission.stats()), { ...one, route: one }, 'counted as admitted; no slot left held')
})

t.test('denied by Redis: 429 with Retry-After from its retryAfterMs, onLimit told, the slot given back', async (t) => {
  const client = scripted()
  const { app, limits } = await gate(t, client)
  const resetAt = Date.now() + 30_000
  // A fixed-window denial: remaining 0, retry in 2001 ms, more when the window ends; then the
  // window's start and count.
  client.replies.push(async () => [0, 0, 0, 2001, resetAt, resetAt - 60_000, resetAt, resetAt - 60_000, 5])
  const res = await app.inject({ url: '/', headers: { 'x-id': 'bob' } })
  t.equal(res.statusCode, 429)
  t.equal(res.headers['retry-after'], '3', 'ceil(2001 / 1000)')
  t.same(rateLimitOf(res.headers.ratelimit), { r: 0, t: 3 }, 'r=0; t, 30 s away by moreAt, no later than Retry-After')
  t.match(JSON.parse(res.body), { statusCode: 429, message: 'Rate limit exceeded, retry in 3 seconds' })
  t.same(limits, [2001])
  const one = { admitted: 0, limited: 1, shed: 0, unavailable: 0, inFlight: 0 }
  t.same(counters(app.admission.stats()), { ...one, route: one })
})

t.test('Redis fails or does not answer: 503 + Retry-After, counted as unavailable, not as shed (fail closed)', async (t) => {
  const client = scripted()
  const { app, sheds, limits } = await gate(t, client, { timeoutMs: 20 })
  client.replies.push(async () => { throw new Error('Connection is closed.') })
  // Never answers: only the backend's timer can end this decision.
  client.replies.push(() => new Promise(() => {}))
  for (const id of ['carol', 'dave']) {
    const res = await app.inject({ url: '/', headers: { 'x-id': id } })
    t.equal(res.statusCode, 503, id)
    t.equal(res.headers['retry-after'], '1', id)
    t.notOk('ratelimit' in res.headers, 'no RateLimit header without a decision')
  }
  t.equal(client.sent.length, 2)
  t.same(sheds, [], 'onShed is for a full in-flight gate, not for a backend that cannot decide')
  t.same(limits, [], 'not a rate limit')
  const two = { admitted: 0, limited: 0, shed: 0, unavailable: 2, inFlight: 0 }
  t.same(counters(app.admission.stats()), { ...two, route: two })
})

t.test("onBackendError 'allow': admitted, counted as admitted and unavailable, the slot given back at the end", async (t) => {
  const client = scripted()
  const { app, sheds } = await gate(t, client, { onBackendError: 'allow' })
  client.replies.push(async () => { throw new Error('READONLY You can\'t write against a read only replica.') })
  const res = await app.inject({ url: '/', headers: { 'x-id': 'erin' } })
  t.equal(res.statusCode, 200)
  t.equal(res.body, 'ok')
  t.notOk('ratelimit' in res.headers)
  t.same(sheds, [])
  const one = { admitted: 1, limited: 0, shed: 0, unavailable: 1, inFlight: 0 }
  t.same(counters(app.admission.stats()), { ...one, route: one })
})

t.test('a key Redis holds under another policy: answered by onBackendError like any failure, never a 500', async (t) => {
  for (const [onBackendError, status] of [['deny', 503], ['allow', 200]] as const) {
    const client = scripted()
    const { app } = await gate(t, client, { onBackendError })
    client.replies.push(async () => [1, 'fixed-window:9:60000'])
    const res = await app.inject({ url: '/', headers: { 'x-id': 'frank' } })
    t.equal(res.statusCode, status, onBackendError)
    t.notMatch(res.body, /RATES_POLICY_CONFLICT|fixed-window|admission:/, 'no internals in the body')
    const counted = { admitted: status === 200 ? 1 : 0, limited: 0, shed: 0, unavailable: 1, inFlight: 0 }
    t.same(counters(app.admission.stats()), { ...counted, route: counted })
  }
})
