import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import got from 'got'
import ky from 'ky'
import admission from '../../lib/index.js'
import { get, listen, sleep } from '../helpers/http.js'

// The README's `/slow` route: a semaphore of one, a handler of 3 s. A second client arrives while
// the first is served. got and ky retry a 503 twice by default, each after its Retry-After: with
// the constant 1 both give up (two seconds of retries, a request of three); with the wait the route
// observed they come back once the first request is done, and get through. What each client ends
// with is asserted, never how long it took.

const SLOW_MS = 3_000

async function slowApp (t: Test, maxInFlight: number | { limit: number, retryAfter: 'observed' }): Promise<string> {
  const app: FastifyInstance = Fastify()
  t.teardown(() => app.close())
  await app.register(admission)
  app.get('/slow', { config: { admission: { maxInFlight } } }, async () => { await sleep(SLOW_MS); return { done: true } })
  const port = await listen(app)
  const base = `http://127.0.0.1:${port}`
  // One request served first: the route has seen how long its work takes.
  t.equal((await get(port, '/slow')).status, 200)
  return base
}

type Client = (url: string) => Promise<number>

const clients: Record<string, Client> = {
  got: async (url) => {
    try {
      return (await got(url)).statusCode
    } catch (error) {
      return (error as { response?: { statusCode: number } }).response?.statusCode ?? 0
    }
  },
  ky: async (url) => {
    try {
      return (await ky(url)).status
    } catch (error) {
      return (error as { response?: Response }).response?.status ?? 0
    }
  }
}

/** The status a client ends with when it asks while another request holds the route's one permit. */
async function secondClient (base: string, client: Client): Promise<{ first: number, second: number }> {
  const first = get(Number(new URL(base).port), '/slow')
  await sleep(200)
  const second = await client(`${base}/slow`)
  return { first: (await first).status, second }
}

for (const [name, client] of Object.entries(clients)) {
  t.test(`${name}: the constant Retry-After: 1 gives up with a 503; the observed wait gets through`, async (t) => {
    const [constant, observed] = await Promise.all([
      slowApp(t, 1).then((base) => secondClient(base, client)),
      slowApp(t, { limit: 1, retryAfter: 'observed' }).then((base) => secondClient(base, client))
    ])
    t.same(constant, { first: 200, second: 503 }, 'two retries a second apart, both while the first request works')
    t.same(observed, { first: 200, second: 200 }, 'told to come back when the first request is expected to end')
  })
}

t.test('the observed wait before any request was observed: the constant 1, with the in-flight fields', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission)
  let release = (): void => {}
  app.get('/slow', { config: { admission: { maxInFlight: { limit: 1, retryAfter: 'observed' } } } }, async () => {
    await new Promise<void>((resolve) => { release = resolve })
    return 'done'
  })
  const port = await listen(app)
  const first = get(port, '/slow')
  await sleep(50)
  const unseen = await get(port, '/slow')
  t.equal(unseen.status, 503)
  t.equal(unseen.headers['retry-after'], '1', 'nothing observed yet: the constant')
  t.equal(unseen.headers.ratelimit, '"route-in-flight";r=0')
  release()
  t.equal((await first).status, 200)
})

t.test("retryAfter: 'observed' is the route semaphore's object form; anything else is refused naming it", async (t) => {
  for (const [maxInFlight, path] of [
    [{ limit: 1, retryAfter: 'measured' }, 'config.admission of GET /x.maxInFlight.retryAfter'],
    [{ limit: 0 }, 'config.admission of GET /x.maxInFlight.limit'],
    [{ retryAfter: 'observed' }, 'config.admission of GET /x.maxInFlight.limit'],
    [{ limit: 1, retry: 'observed' }, 'config.admission of GET /x.maxInFlight.retry'],
    ['1', 'config.admission of GET /x.maxInFlight']
  ] as const) {
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(admission)
    app.get('/x', { config: { admission: { maxInFlight: maxInFlight as never } } }, async () => 'ok')
    const error = await app.ready().then(() => undefined, (e: unknown) => e)
    t.match(error, { code: 'ADMISSION_INVALID_OPTION', path }, JSON.stringify(maxInFlight))
  }
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission)
  app.get('/x', { config: { admission: { maxInFlight: { limit: 2 } } } }, async () => 'ok')
  await app.ready()
  t.equal((await app.inject('/x')).statusCode, 200, '{ limit } alone: the constant, as a number')
})
