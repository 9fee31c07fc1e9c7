// The peers' own quick starts (their READMEs' "Usage", @fastify/rate-limit 11 and
// @fastify/under-pressure 9), each run as written and as the migration guide translates it: what
// a client sees must match. under-pressure's registers without `await`, as its README does; ours
// is registered without `await` in both.
import t from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import rateLimit from '@fastify/rate-limit'
import underPressure from '@fastify/under-pressure'
import admission from '../../lib/index.js'

async function hundredAndOne (app: FastifyInstance): Promise<{ statuses: Set<number>, last: { status: number, body: Record<string, unknown>, retryAfter: unknown } }> {
  const statuses = new Set<number>()
  for (let i = 0; i < 100; i++) statuses.add((await app.inject('/')).statusCode)
  const res = await app.inject('/')
  return { statuses, last: { status: res.statusCode, body: res.json(), retryAfter: res.headers['retry-after'] } }
}

t.test('@fastify/rate-limit\'s quick start: 100 a minute, then a 429 with the same fields', async (t) => {
  const theirs = Fastify()
  t.teardown(() => theirs.close())
  await theirs.register(rateLimit, { max: 100, timeWindow: '1 minute' })
  theirs.get('/', (_request, reply) => { reply.send({ hello: 'world' }) })

  // Ours without await: registration order does not matter here.
  const ours = Fastify()
  t.teardown(() => ours.close())
  void ours.register(admission, { rateLimit: { algorithm: 'fixed-window', limit: 100, windowMs: 60_000 } })
  ours.get('/', (_request, reply) => { reply.send({ hello: 'world' }) })
  await ours.ready()

  const a = await hundredAndOne(theirs)
  const b = await hundredAndOne(ours)
  t.same([...a.statuses], [200])
  t.same([...b.statuses], [200], 'a hundred admitted')
  t.equal(b.last.status, a.last.status, '429')
  t.same(Object.keys(b.last.body).sort(), Object.keys(a.last.body).sort(), `the same fields: ${Object.keys(a.last.body).join(', ')}`)
  t.same([b.last.body.statusCode, b.last.body.error], [a.last.body.statusCode, a.last.body.error])
  t.match(b.last.body.message, /^Rate limit exceeded, retry in /, `the message opens alike (${String(a.last.body.message)} / ${String(b.last.body.message)})`)
  t.ok(Number(b.last.retryAfter) > 0 && Number(b.last.retryAfter) <= 60, 'Retry-After')
})

t.test('@fastify/rate-limit\'s setErrorHandler example shapes the 429 with refusal: \'error\'', async (t) => {
  const shape = (app: FastifyInstance): void => {
    app.setErrorHandler(function (error: { statusCode?: number, message: string }, _request, reply) {
      if (error.statusCode === 429) {
        reply.code(429)
        error.message = 'You hit the rate limit! Slow down please!'
      }
      reply.send(error)
    })
  }
  const theirs = Fastify()
  t.teardown(() => theirs.close())
  shape(theirs)
  await theirs.register(rateLimit, { max: 1, timeWindow: '1 minute' })
  theirs.get('/', async () => 'ok')
  const ours = Fastify()
  t.teardown(() => ours.close())
  shape(ours)
  await ours.register(admission, { rateLimit: { algorithm: 'fixed-window', limit: 1, windowMs: 60_000 }, refusal: 'error' })
  ours.get('/', async () => 'ok')
  for (const app of [theirs, ours]) await app.inject('/')
  const [a, b] = [await theirs.inject('/'), await ours.inject('/')]
  t.equal(b.statusCode, a.statusCode)
  t.equal(b.json().message, 'You hit the rate limit! Slow down please!')
  t.equal(b.json().message, a.json().message)
  t.ok(b.headers['retry-after'], 'Retry-After kept whatever the handler sends')
})

t.test('a redirect from setErrorHandler answers 302, as @fastify/rate-limit\'s (its issue 284): the handler has its say on the status', async (t) => {
  const apps = await Promise.all([
    (async () => {
      const theirs = Fastify()
      theirs.setErrorHandler((_error, _request, reply) => reply.redirect('/slow-down'))
      await theirs.register(rateLimit, { max: 1, timeWindow: '1 minute' })
      theirs.get('/', async () => 'ok')
      return theirs
    })(),
    (async () => {
      const ours = Fastify()
      ours.setErrorHandler((_error, _request, reply) => reply.redirect('/slow-down'))
      await ours.register(admission, { rateLimit: { limit: 1, windowMs: 60_000 }, refusal: 'error' })
      ours.get('/', async () => 'ok')
      return ours
    })()
  ])
  for (const app of apps) t.teardown(() => app.close())
  const answers = []
  for (const app of apps) {
    await app.inject('/')
    answers.push(await app.inject('/'))
  }
  const [theirs, ours] = answers as [Awaited<ReturnType<FastifyInstance['inject']>>, Awaited<ReturnType<FastifyInstance['inject']>>]
  t.equal(theirs.statusCode, 302)
  t.equal(ours.statusCode, 302, 'the redirect, not the refusal\'s 429')
  t.equal(ours.headers.location, '/slow-down')
  t.equal(ours.headers['retry-after'], '60', 'Retry-After still the gate\'s')
})

t.test('@fastify/under-pressure\'s quick start, registered without await: the same answer once sampled, and isUnderPressure() as pressure()', async (t) => {
  const options = { maxEventLoopDelay: 1000, maxHeapUsedBytes: 100000000, maxRssBytes: 100000000, maxEventLoopUtilization: 0.98 }
  const seen: boolean[] = []
  const theirs = Fastify()
  t.teardown(() => theirs.close())
  theirs.register(underPressure, options)
  theirs.get('/', (_request, reply) => {
    seen.push(theirs.isUnderPressure())
    reply.send({ hello: 'world' })
  })
  const ours = Fastify()
  t.teardown(() => ours.close())
  ours.register(admission, { rateLimit: false, pressure: options })
  ours.get('/', (_request, reply) => {
    seen.push(ours.admission.pressure()?.underPressure === true)
    reply.send({ hello: 'world' })
  })
  await Promise.all([theirs.ready(), ours.ready()])
  // Both sample every second; past the first sample each has a reading.
  await new Promise((resolve) => setTimeout(resolve, 1_300))
  const [a, b] = [await theirs.inject('/'), await ours.inject('/')]
  const rss = process.memoryUsage().rss
  t.equal(b.statusCode, a.statusCode, `the same status (RSS ${Math.round(rss / 1e6)} MB against a 100 MB limit)`)
  if (a.statusCode === 503) {
    t.ok(b.headers['retry-after'], 'Retry-After')
    t.same(seen, [], 'no handler ran')
  } else {
    t.same(seen, [false, false], 'the handler asks, both say no')
  }
})
