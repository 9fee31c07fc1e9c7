import t, { type Test } from 'tap'
import { Agent, Pool, fetch, request } from 'undici'
import { admissionRetry } from '../../lib/client/index.js'
import { scriptedServer, type ScriptedServer } from './scripted-server.js'

// The interceptor against a plain node:http server that refuses as a test scripts it, on real
// sockets. The relation asserted is the one that holds however slow the machine is: a request
// that follows a refusal arrives no earlier than the refusal was answered plus the time it
// advertised. No duration is asserted the other way.

async function server (t: Test, answer: Parameters<typeof scriptedServer>[0]): Promise<ScriptedServer> {
  const s = await scriptedServer(answer)
  t.teardown(s.close)
  return s
}

function agentWith (t: Test, interceptor: ReturnType<typeof admissionRetry>): Agent {
  const agent = new Agent()
  t.teardown(() => agent.close())
  return agent.compose(interceptor) as Agent
}

t.test('429 with Retry-After in delta-seconds: the retry arrives no earlier than the refusal plus 1 s, numbered 2', async (t) => {
  const s = await server(t, (_r, n) => (n === 0 ? { status: 429, headers: { 'retry-after': '1' } } : { status: 200 }))
  const retry = admissionRetry()
  const answer = await request(`${s.origin}/a`, { dispatcher: agentWith(t, retry) })
  t.equal(answer.statusCode, 200)
  t.equal(await answer.body.text(), 'ok')
  t.strictSame(s.arrivals.map((a) => a.attempt), ['1', '2'])
  t.ok(s.arrivals[1]!.at >= s.arrivals[0]!.answeredAt + 1000, 'not before the advertised time')
  t.match(retry.stats(), { requests: 1, attempts: 2, retries: 1, retriesDenied: 0, waits: 1, pauses: 0 })
  t.ok(retry.stats().waitedMs > 0, 'the wait is counted')
})

t.test('503 with Retry-After as an HTTP-date: the origin pauses, and another request waits too', async (t) => {
  let refusedUntil = 0
  const s = await server(t, (_r, n) => {
    if (n !== 0) return { status: 200 }
    // A date one whole second after the next, as HTTP-dates have whole seconds.
    refusedUntil = (Math.floor(Date.now() / 1000) + 2) * 1000
    return { status: 503, headers: { 'retry-after': new Date(refusedUntil).toUTCString() } }
  })
  const retry = admissionRetry()
  const dispatcher = agentWith(t, retry)
  const first = await request(`${s.origin}/first`, { dispatcher })
  t.equal(first.statusCode, 200)
  await first.body.text()
  const other = await request(`${s.origin}/other`, { dispatcher })
  await other.body.text()
  t.strictSame(s.arrivals.map((a) => `${a.path} ${a.attempt}`), ['/first 1', '/first 2', '/other 1'])
  for (const a of s.arrivals.slice(1)) t.ok(a.at >= refusedUntil, `${a.path} arrived at or after the date`)
  t.equal(retry.stats().pauses, 1)
})

t.test('a pause holds requests sent while it lasts: none arrives before it ends', async (t) => {
  const s = await server(t, (r) => (r.url === '/refused' ? { status: 503, headers: { 'retry-after': '1' } } : { status: 200 }))
  const retry = admissionRetry({ maxRetries: 0 })
  const dispatcher = agentWith(t, retry)
  const refused = await request(`${s.origin}/refused`, { dispatcher })
  t.equal(refused.statusCode, 503, 'no retry left: the refusal is the answer')
  await refused.body.text()
  const answers = await Promise.all(['/a', '/b', '/c'].map(async (path) => {
    const answer = await request(`${s.origin}${path}`, { dispatcher })
    await answer.body.text()
    return answer.statusCode
  }))
  t.strictSame(answers, [200, 200, 200])
  const refusal = s.arrivals[0]!
  for (const a of s.arrivals.slice(1)) t.ok(a.at >= refusal.answeredAt + 1000, `${a.path} waited for the pause`)
  t.match(retry.stats(), { requests: 4, retries: 0, pauses: 1, waits: 3 })
})

for (const [name, fields] of [
  ['draft 11', { ratelimit: '"default";r=0;t=1', 'ratelimit-policy': '"default";q=1;w=1' }],
  ['draft 7', { ratelimit: 'limit=1, remaining=0, reset=1' }],
  ['draft 6', { 'ratelimit-remaining': '0', 'ratelimit-reset': '1', 'ratelimit-limit': '1' }],
  ['x-ratelimit', { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '1' }]
] as const) {
  t.test(`${name} fields with nothing left on a 200: the next request waits for the reset`, async (t) => {
    const s = await server(t, (_r, n) => (n === 0 ? { status: 200, headers: fields } : { status: 200 }))
    const retry = admissionRetry()
    const dispatcher = agentWith(t, retry)
    for (const path of ['/spent', '/next']) await (await request(`${s.origin}${path}`, { dispatcher })).body.text()
    t.ok(s.arrivals[1]!.at >= s.arrivals[0]!.answeredAt + 1000, 'the next request waited for the reset')
    t.match(retry.stats(), { requests: 2, paced: 1, waits: 1, retries: 0 })
  })
}

t.test('fetch, Pool and a plain request() each retry through the interceptor', async (t) => {
  const s = await server(t, (r, _n, before) => (before.some((a) => a.path === r.url) ? { status: 200 } : { status: 503 }))
  const retry = admissionRetry({ baseDelayMs: 1, maxDelayMs: 1 })
  const viaFetch = await fetch(`${s.origin}/fetch`, { dispatcher: agentWith(t, retry) })
  t.equal(viaFetch.status, 200)
  t.equal(await viaFetch.text(), 'ok')
  const pool = new Pool(s.origin)
  t.teardown(() => pool.close())
  const composed = pool.compose(retry)
  const viaPool = await composed.request({ path: '/pool', method: 'GET' })
  t.equal(viaPool.statusCode, 200)
  await viaPool.body.text()
  t.strictSame(s.arrivals.map((a) => `${a.path} ${a.attempt}`), ['/fetch 1', '/fetch 2', '/pool 1', '/pool 2'])
  t.match(retry.stats(), { requests: 2, retries: 2, pauses: 0 })
})
