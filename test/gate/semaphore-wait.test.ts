import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import got from 'got'
import ky from 'ky'
import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import admission, { DECISION_CHANNEL, type AdmissionDecisionEvent } from '../../lib/index.js'
import { get, listen, sleep } from '../helpers/http.js'

// The README's `/slow` route: a semaphore of one. A second client arrives while the first is served;
// got and ky retry a 503 twice by default, each after its Retry-After. With the constant 1 both give
// up while the first request still works; with the wait the route observed they are told to come
// back later than 1 s, and get through once the first is done. The first request is held by the
// test, not by a clock: it ends when the test lets it (after the client's last answer with the
// constant, at the client's first refusal with the observed wait), so what each client ends with
// depends on the rule alone, never on how fast the machine is.

/** The duration the route observes first (one request served before the test). */
const OBSERVED_MS = 4_000

interface SlowApp {
  readonly base: string
  /** The first request is in the handler. */
  readonly entered: Promise<void>
  /** Ends the first request. */
  release (): void
  /** The Retry-After of each 503 sent. */
  readonly refusals: string[]
}

async function slowApp (t: Test, maxInFlight: number | { limit: number, retryAfter: 'observed' }, releaseAtFirstRefusal: boolean): Promise<SlowApp> {
  const app: FastifyInstance = Fastify()
  t.teardown(() => app.close())
  await app.register(admission)
  let served = 0
  let enter = (): void => {}
  const entered = new Promise<void>((resolve) => { enter = resolve })
  let release = (): void => {}
  const released = new Promise<void>((resolve) => { release = resolve })
  const refusals: string[] = []
  // Each refusal as the decision channel tells it (a refusal is written before any onSend hook).
  const onDecision = (message: unknown): void => {
    const event = message as AdmissionDecisionEvent
    if (event.request.server !== app || event.status !== 503) return
    refusals.push(String(event.retryAfterSeconds))
    if (releaseAtFirstRefusal) release()
  }
  subscribe(DECISION_CHANNEL, onDecision)
  t.teardown(() => { unsubscribe(DECISION_CHANNEL, onDecision) })
  app.get('/slow', { config: { admission: { maxInFlight } } }, async () => {
    // The first request takes OBSERVED_MS (the route learns its duration); the next waits for the test.
    if (served++ === 0) await sleep(OBSERVED_MS)
    else {
      enter()
      await released
    }
    return { done: true }
  })
  const port = await listen(app)
  t.equal((await get(port, '/slow')).status, 200)
  return { base: `http://127.0.0.1:${port}`, entered, release, refusals }
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
async function secondClient (slow: SlowApp, client: Client): Promise<{ first: number, second: number }> {
  const first = get(Number(new URL(slow.base).port), '/slow')
  await slow.entered
  const second = await client(`${slow.base}/slow`)
  slow.release()
  return { first: (await first).status, second }
}

for (const [name, client] of Object.entries(clients)) {
  t.test(`${name}: the constant Retry-After: 1 gives up with a 503; the observed wait gets through`, async (t) => {
    const [constantApp, observedApp] = await Promise.all([slowApp(t, 1, false), slowApp(t, { limit: 1, retryAfter: 'observed' }, true)])
    const [constant, observed] = await Promise.all([secondClient(constantApp, client), secondClient(observedApp, client)])
    t.same(constant, { first: 200, second: 503 }, 'its retries, a second apart, all while the first request works')
    t.same(constantApp.refusals, ['1', '1', '1'], 'the first attempt and its two retries, each told 1 s')
    t.same(observed, { first: 200, second: 200 }, 'told to come back when the first request is expected to end')
    t.equal(observedApp.refusals.length, 1)
    t.ok(Number(observedApp.refusals[0]) > 1, `told more than the constant (${observedApp.refusals[0]} s): the route's observed duration less the first request's age`)
  })
}

t.test('the observed wait before any request was observed: the constant 1, with the in-flight fields', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission)
  let release = (): void => {}
  let enter = (): void => {}
  const entered = new Promise<void>((resolve) => { enter = resolve })
  app.get('/slow', { config: { admission: { maxInFlight: { limit: 1, retryAfter: 'observed' } } } }, async () => {
    enter()
    await new Promise<void>((resolve) => { release = resolve })
    return 'done'
  })
  const port = await listen(app)
  const first = get(port, '/slow')
  await entered
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
