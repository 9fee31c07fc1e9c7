import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import { Agent, request } from 'undici'
import admission, { type AdmissionOptions } from '../../lib/index.js'
import { admissionRetry } from '../../lib/client/index.js'
import { listen, deferred } from '../helpers/http.js'

// The client against this plugin, on real sockets: a Fastify app with fastify-admission
// registered and limits that refuse. Arrivals are recorded by an onRequest hook that runs before
// the plugin's, on the clock the client reads: a request that follows a refusal arrives no
// earlier than the refused one arrived plus the advertised wait (it was refused after it arrived).

interface Seen { at: number, path: string, attempt: string | undefined, status: number }

async function app (t: Test, options: AdmissionOptions, handler: () => Promise<string> = async () => 'ok'): Promise<{ origin: string, seen: Seen[] }> {
  const seen: Seen[] = []
  const server: FastifyInstance = Fastify()
  t.teardown(() => server.close())
  server.addHook('onRequest', async (request) => {
    seen.push({ at: Date.now(), path: request.url, attempt: request.headers['retry-attempt'] as string | undefined, status: 0 })
  })
  server.addHook('onResponse', async (request, reply) => {
    const entry = seen.find((s) => s.path === request.url && s.status === 0)
    if (entry !== undefined) entry.status = reply.statusCode
  })
  await server.register(admission, options)
  server.get('/*', handler)
  return { origin: `http://127.0.0.1:${await listen(server)}`, seen }
}

function dispatcher (t: Test, retry: ReturnType<typeof admissionRetry>): Agent {
  const agent = new Agent()
  t.teardown(() => agent.close())
  return agent.compose(retry) as Agent
}

t.test('a quota of 1 a second: the client reads RateLimit and waits for the reset, so the server refuses nothing', async (t) => {
  const { origin, seen } = await app(t, { maxInFlight: false, rateLimit: { algorithm: 'fixed-window', limit: 1, windowMs: 1000 }, key: () => 'one' })
  const retry = admissionRetry()
  const d = dispatcher(t, retry)
  for (const path of ['/1', '/2', '/3']) {
    const answer = await request(`${origin}${path}`, { dispatcher: d })
    await answer.body.text()
    t.equal(answer.statusCode, 200, path)
  }
  t.strictSame(seen.map((s) => s.status), [200, 200, 200], 'no 429: paced before a refusal')
  t.ok(retry.stats().paced >= 2, 'held by the fields after each spent quota')
  t.match(retry.stats(), { requests: 3, retries: 0 })
})

t.test('a 429 with Retry-After: the retry arrives no earlier than advertised, as attempt 2', async (t) => {
  // A token every 3 s (not a fixed window, whose boundary could fall between the two): two
  // requests sent together are one admitted and one refused however slow the machine is.
  const { origin, seen } = await app(t, { maxInFlight: false, rateLimit: { limit: 1, windowMs: 3000 }, key: () => 'one', headers: false })
  const retry = admissionRetry()
  const d = dispatcher(t, retry)
  const answers = await Promise.all(['/a', '/b'].map(async (path) => {
    const answer = await request(`${origin}${path}`, { dispatcher: d })
    await answer.body.text()
    return answer.statusCode
  }))
  t.strictSame(answers, [200, 200])
  const refused = seen.find((s) => s.status === 429)
  if (refused === undefined) return t.fail('one of the two is refused')
  const retried = seen.find((s) => s.path === refused.path && s.attempt === '2')
  if (retried === undefined) return t.fail('the refused one is retried as attempt 2')
  t.ok(retried.at >= refused.at + 1000, 'not before the advertised time')
  t.equal(retry.stats().retries, 1)
})

t.test('a full gate sheds 503 with Retry-After: the whole origin pauses, the shed request comes back as attempt 2', async (t) => {
  const release = deferred()
  const { origin, seen } = await app(t, { maxInFlight: 1 }, async () => { await release.promise; return 'ok' })
  const retry = admissionRetry()
  const d = dispatcher(t, retry)
  const slow = request(`${origin}/slow`, { dispatcher: d })
  while (seen.length === 0) await new Promise((resolve) => setTimeout(resolve, 5))
  const shed = request(`${origin}/shed`, { dispatcher: d })
  while (retry.stats().pauses === 0) await new Promise((resolve) => setTimeout(resolve, 5))
  release.resolve()
  const late = request(`${origin}/late`, { dispatcher: d })
  for (const answer of await Promise.all([slow, shed, late])) {
    t.equal(answer.statusCode, 200)
    await answer.body.text()
  }
  const refused = seen.find((s) => s.path === '/shed' && s.attempt === '1')!
  t.equal(refused.status, 503)
  for (const s of seen.filter((s) => s.at > refused.at)) t.ok(s.at >= refused.at + 1000, `${s.path} (attempt ${s.attempt}) waited for the pause`)
  t.ok(seen.some((s) => s.path === '/shed' && s.attempt === '2' && s.status === 200))
  t.match(retry.stats(), { pauses: 1, retries: 1 })
})
