// Charging after the response in the HTTP gate (config.admission.charge): a request takes its cost
// up front, and the units it really took when its response ends; a client in debt is refused with
// a Retry-After computed from the debt until time repays it. Bad amounts, callbacks that throw and
// a backend that cannot take the charge are logged once per route and leave the estimate standing.
// The memory backend's clock is injected: no sleeping.
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import { setImmediate as turn } from 'node:timers/promises'
import { request as httpRequest } from 'node:http'
import type { AddressInfo } from 'node:net'
import admission, { AdmissionOptionError, memoryBackend, type AdmissionOptions, type AdmissionRouteOptions, type RatesBackend } from '../../lib/index.js'
import { deferred } from '../helpers/http.js'

const T0 = 1_700_000_000_000
// 100 tokens a minute: one every 600 ms.
const TOKENS = { algorithm: 'token-bucket', limit: 100, windowMs: 60_000 } as const

interface Logged { msg: string, callback?: string, route?: string, err?: { code?: string, message?: string } }

/** The units a request reports in its `x-used` header, as a handler would from its work. */
const used = (request: FastifyRequest): number => Number(request.headers['x-used'])

async function app (t: Test, clock: { now: number }, route: AdmissionRouteOptions, options: AdmissionOptions = {}, backend?: RatesBackend): Promise<{ app: FastifyInstance, lines: Logged[] }> {
  const lines: Logged[] = []
  const one = Fastify({ logger: { level: 'error', stream: { write: (line: string) => { lines.push(JSON.parse(line) as Logged) } } } })
  t.teardown(() => one.close())
  await one.register(admission, { backend: backend ?? memoryBackend({ clock: () => clock.now }), rateLimit: TOKENS, ...options })
  one.get('/complete', { config: { admission: route } }, async () => 'ok')
  await one.ready()
  return { app: one, lines }
}

/** A request reporting `units`, once its response (and so its charge) is over. */
async function call (one: FastifyInstance, units: unknown, headers: Record<string, string> = {}): Promise<{ status: number, retryAfter: string | undefined, ratelimit: string | undefined }> {
  const res = await one.inject({ url: '/complete', headers: { 'x-used': String(units), ...headers } })
  // onResponse (the permit's end, where the charge is taken) runs as the response finishes.
  await turn()
  return { status: res.statusCode, retryAfter: res.headers['retry-after'] as string | undefined, ratelimit: res.headers.ratelimit as string | undefined }
}

t.test('the estimate up front, the rest after: a client in debt is refused with a Retry-After from the debt, admitted once repaid', async (t) => {
  const clock = { now: T0 }
  const { app: one } = await app(t, clock, { cost: 10, charge: used })
  t.equal((await call(one, 90)).status, 200, '10 up front, 80 more after: 10 left')
  t.match(await call(one, 60), { status: 200, ratelimit: /^"default";r=0;/ }, 'admitted on its estimate (10 left); then 50 more: 50 owed')
  // Owed 50, and the next request's cost of 10: 60 tokens at one per 600 ms.
  t.match(await call(one, 10), { status: 429, retryAfter: '36' }, 'in debt: refused, with the wait the debt takes')
  clock.now += 36_000 - 1
  t.equal((await call(one, 10)).status, 429, 'one ms early: still refused')
  clock.now += 1
  t.equal((await call(one, 10)).status, 200, 'repaid: admitted')
})

t.test('fewer units than the estimate come back; the amount the estimate was is charged nothing', async (t) => {
  const clock = { now: T0 }
  const { app: one } = await app(t, clock, { cost: 50, charge: used })
  t.equal((await call(one, 2)).status, 200)
  t.match(await call(one, 50), { status: 200, ratelimit: /^"default";r=48;/ }, '48 of the first estimate came back: 98 before this one, 48 after')
})

t.test('an async charge; a stack charges every policy; a tier charges its own quota', async (t) => {
  const clock = { now: T0 }
  const { app: async } = await app(t, clock, { cost: 1, charge: async (request) => used(request) })
  t.equal((await call(async, 100)).status, 200)
  t.equal((await call(async, 1)).status, 429, 'the promised amount was charged')

  const { app: stacked } = await app(t, clock, {
    rateLimit: [{ algorithm: 'token-bucket', limit: 10, windowMs: 1000, name: 'second' }, { algorithm: 'fixed-window', limit: 1000, windowMs: 60_000, name: 'minute' }],
    charge: used
  })
  t.equal((await call(stacked, 500)).status, 200)
  const owed = await call(stacked, 1)
  t.equal(owed.status, 429, 'the bucket owes one capacity')
  t.match(owed.ratelimit, /^"second";r=0;t=2, "minute";r=500;t=\d+$/, 'the minute counts the 500 the first request took (the refused one took nothing)')

  const { app: tiered } = await app(t, clock, {
    rateLimit: { tiers: { free: { limit: 10, windowMs: 1000 }, pro: { limit: 1000, windowMs: 1000 } }, tier: (request) => String(request.headers['x-tier']) },
    charge: used
  })
  t.equal((await call(tiered, 10, { 'x-tier': 'free' })).status, 200)
  t.equal((await call(tiered, 1, { 'x-tier': 'free' })).status, 429, "the free tier's quota took the charge")
  t.equal((await call(tiered, 1, { 'x-tier': 'pro' })).status, 200, 'the pro tier is another quota')
})

t.test('only what the quota admitted is charged: not a refusal, an allow-listed client, a shadow refusal', async (t) => {
  const clock = { now: T0 }
  const calls: string[] = []
  const charge = (request: FastifyRequest): number => { calls.push(String(request.headers['x-who'])); return used(request) }
  const { app: one } = await app(t, clock, { cost: 100, charge }, { allowList: ['vip'], key: (request) => String(request.headers['x-who']) })
  t.equal((await call(one, 100, { 'x-who': 'ada' })).status, 200)
  t.equal((await call(one, 100, { 'x-who': 'ada' })).status, 429)
  t.equal((await call(one, 100, { 'x-who': 'vip' })).status, 200)
  t.same(calls, ['ada'], 'the refused request and the allow-listed one were not charged')

  const shadowCalls: string[] = []
  const { app: shadow } = await app(t, clock, { cost: 100, enforce: false, charge: (request) => { shadowCalls.push('x'); return used(request) } })
  t.equal((await call(shadow, 100)).status, 200)
  t.equal((await call(shadow, 100)).status, 200, 'shadow mode: would have been refused')
  t.equal(shadowCalls.length, 1, 'a request the quota would have refused took nothing up front, and is charged nothing')
})

t.test('bad amounts and failing callbacks: logged once per route (typed), the estimate stands, the response unchanged', async (t) => {
  const clock = { now: T0 }
  let answer: () => unknown = () => 1
  const { app: one, lines } = await app(t, clock, { cost: 10, charge: () => answer() as number })
  for (const bad of [-1, 1.5, 'ten', null, 2 ** 53]) {
    answer = () => bad
    t.equal((await call(one, 0)).status, 200, `a response is not changed by ${String(bad)}`)
  }
  const invalid = lines.filter((line) => line.err?.code === 'ADMISSION_INVALID_CHARGE')
  t.equal(invalid.length, 1, 'logged once, until a good amount')
  t.match(invalid[0], { callback: 'charge', route: 'GET /complete', err: { message: /config\.admission\.charge of GET \/complete to return a safe integer from 0 to 100 \(.*\), got -1 \(number\)$/ } })
  t.match(await call(one, 0), { ratelimit: /^"default";r=40;/ }, 'six requests took their estimate of 10 and nothing else')
  answer = () => 10
  await call(one, 0)
  answer = () => 'x'.repeat(10_000)
  await call(one, 0)
  t.equal(lines.filter((line) => line.err?.code === 'ADMISSION_INVALID_CHARGE').length, 2, 'after a good amount, the next bad one is logged again')
  const shown = lines.filter((line) => line.err?.code === 'ADMISSION_INVALID_CHARGE')[1]!.err!.message!
  t.match(shown, /got 'x{80}'\.\.\. 9920 more characters/, 'the value shown short, not whole')
  t.ok(shown.length < 400)

  // Above the capacity: the capacity is charged (the most a quota can owe), and it is logged.
  const { app: big, lines: bigLines } = await app(t, clock, { cost: 1, charge: used })
  t.equal((await call(big, 1_000_000)).status, 200)
  t.match(bigLines, [{ err: { code: 'ADMISSION_INVALID_CHARGE', message: /got 1000000 \(number\)/ } }])
  t.match(await call(big, 1), { status: 429, retryAfter: '1' }, 'charged 100, the whole bucket: the next token in 600 ms')

  for (const how of ['throws', 'rejects'] as const) {
    const { app: failing, lines: failed } = await app(t, clock, { cost: 10, charge: () => { if (how === 'throws') throw new Error('usage lookup failed'); return Promise.reject(new Error('usage lookup failed')) } })
    t.equal((await call(failing, 0)).status, 200)
    t.equal((await call(failing, 0)).status, 200)
    t.match(failed, [{ callback: 'charge', route: 'GET /complete', err: { message: 'usage lookup failed' }, msg: /charging nothing beyond the request's cost \(logged once until it works again\)/ }], `${how}: logged once`)
    t.match(await call(failing, 0), { ratelimit: /^"default";r=70;/ }, `${how}: the estimates stand`)
  }
})

t.test('a backend that cannot take the charge: logged once, the estimate stands', async (t) => {
  const clock = { now: T0 }
  const inner = memoryBackend({ clock: () => clock.now })
  let down = false
  const backend: RatesBackend = {
    kind: 'flaky',
    limiter: (address, policy) => {
      const limiter = inner.limiter(address, policy)
      return {
        policy: limiter.policy,
        consume: (identity, cost) => limiter.consume(identity, cost),
        state: (identity) => limiter.state(identity),
        delete: (identity) => limiter.delete(identity),
        charge: (identity, units) => down ? Promise.reject(new Error('backend down')) : limiter.charge!(identity, units)
      }
    },
    stop: () => inner.stop()
  }
  const { app: one, lines } = await app(t, clock, { cost: 10, charge: used }, {}, backend)
  down = true
  await call(one, 50)
  await call(one, 50)
  t.match(lines, [{ callback: 'charge (the backend)', route: 'GET /complete', err: { message: 'backend down' }, msg: /the request's cost stands/ }])
  down = false
  t.match(await call(one, 10), { ratelimit: /^"default";r=70;/ }, 'only the estimates were taken')
})

t.test('registration: what a charge needs, named with the fix', async (t) => {
  const register = async (route: AdmissionRouteOptions, options: AdmissionOptions = {}): Promise<unknown> => {
    const one = Fastify()
    t.teardown(() => one.close())
    await one.register(admission, { rateLimit: TOKENS, ...options })
    one.get('/x', { config: { admission: route } }, async () => 'ok')
    return one.ready().then(() => undefined, (error: unknown) => error)
  }
  const path = 'config.admission of GET /x.charge'
  t.match(await register({ charge: 5 as never }), { code: 'ADMISSION_INVALID_OPTION', message: new RegExp(`${path.replace(/\./g, '\\.')}.*a function \\(request, reply\\) => units`) })
  t.match(await register({ rateLimit: false, charge: used }), { message: /absent where there is no rate limit/ })
  t.match(await register({ count: 'failures', charge: used }), { message: /absent with count: 'failures'/ })
  t.match(await register({ rateLimit: { algorithm: 'token-bucket', limit: 100_000_000, windowMs: 86_400_000 }, charge: used }), { message: /cannot hold a debt of one capacity \(3 \* burst \* windowMs = 25920000000000000/ })
  const consumeOnly: RatesBackend = {
    kind: 'consume-only',
    limiter: (address, policy) => {
      const limiter = memoryBackend().limiter(address, policy)
      return { policy: limiter.policy, consume: (identity, cost) => limiter.consume(identity, cost), state: (identity) => limiter.state(identity), delete: (identity) => limiter.delete(identity) }
    },
    stop: async () => {}
  }
  const error = await register({ charge: used }, { backend: consumeOnly })
  t.ok(error instanceof AdmissionOptionError)
  t.match(error, { message: /the "consume-only" backend's limiters have no charge/ })
  const inner = memoryBackend()
  const stacksWithoutCharge: RatesBackend = {
    kind: 'stacks-consume-only',
    limiter: (address, policy) => inner.limiter(address, policy),
    stack: (address, policies) => {
      const stack = inner.stack!(address, policies)
      return { policies: stack.policies, consume: (i, c) => stack.consume(i, c), check: (i, c) => stack.check(i, c), state: (i) => stack.state(i), delete: (i) => stack.delete(i) }
    },
    stop: () => inner.stop()
  }
  t.match(await register({ rateLimit: [{ limit: 10, windowMs: 1000 }, { limit: 100, windowMs: 60_000 }], charge: used }, { backend: stacksWithoutCharge }), { message: /the "stacks-consume-only" backend's limiters have no charge/ })
  t.equal(await register({ charge: used }), undefined, 'a plain route with a quota: fine')
})

t.test('a client that leaves while the work runs is still charged once the work is done (a real socket)', async (t) => {
  const clock = { now: T0 }
  const work = deferred<void>()
  const started = deferred<void>()
  const charged: number[] = []
  const one = Fastify()
  t.teardown(() => one.close())
  await one.register(admission, { backend: memoryBackend({ clock: () => clock.now }), rateLimit: TOKENS })
  one.get('/slow', { config: { admission: { cost: 1, charge: (_request: FastifyRequest, reply: FastifyReply) => { charged.push(reply.statusCode); return 100 } } } }, async () => {
    started.resolve()
    await work.promise
    return 'done'
  })
  one.get('/fast', async () => 'ok')
  await one.listen({ port: 0, host: '127.0.0.1' })
  const port = (one.server.address() as AddressInfo).port
  const req = httpRequest({ port, host: '127.0.0.1', path: '/slow' })
  req.on('error', () => {})
  req.end()
  await started.promise
  req.destroy()
  await new Promise((resolve) => setTimeout(resolve, 50))
  t.same(charged, [], 'not while the work runs')
  work.resolve()
  while (charged.length === 0) await new Promise((resolve) => setTimeout(resolve, 10))
  t.equal(charged.length, 1, 'charged once, when the work ended')
  const res = await one.inject('/slow')
  t.equal(res.statusCode, 429, 'the 100 units were taken')
})
