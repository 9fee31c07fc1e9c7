// Retries shed first (`retries`, on by default): a request whose `Retry-Attempt` says 2 or more is
// refused within the last `reserve` of an in-flight limit, and while queueing delay stands, where a
// first attempt is still admitted. Requests are held in their handlers: no timing.
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import { request } from 'undici'
import admission from '../../lib/index.js'
import type { AdmissionOptions } from '../../lib/gate/options/options.js'
import { AdmissionOptionError } from '../../lib/gate/errors.js'
import { deferred, eventually, get, listen } from '../helpers/http.js'

const RETRY = { 'retry-attempt': '2' }

/** An app whose handlers wait until released; `send` resolves with a status once answered, or 0 once admitted and held. */
async function held (t: Test, options: AdmissionOptions, config: object = {}): Promise<{ app: FastifyInstance, send: (headers?: Record<string, string>) => Promise<number>, release: () => void }> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: false, ...options })
  const hold = deferred()
  app.get('/', { config }, async () => { await hold.promise; return 'ok' })
  const pending: Array<Promise<unknown>> = []
  const send = async (headers: Record<string, string> = {}): Promise<number> => {
    const before = app.admission.stats().admitted
    let status = 0
    pending.push(app.inject({ url: '/', headers }).then((r) => { status = r.statusCode }))
    await eventually(() => status !== 0 || app.admission.stats().admitted > before)
    return status
  }
  const release = (): void => { hold.resolve() }
  t.teardown(async () => { release(); await Promise.all(pending) })
  return { app, send, release }
}

t.test('a full gate refuses retries first: the last floor(reserve * L) slots are first attempts\'', async (t) => {
  const { app, send } = await held(t, { maxInFlight: 10, retries: { reserve: 0.2 } })
  for (let i = 0; i < 4; i++) t.equal(await send(RETRY), 0, `retry ${i + 1} admitted on a quiet gate`)
  for (let i = 0; i < 4; i++) t.equal(await send(), 0, `first attempt ${i + 1}`)
  t.equal(await send(RETRY), 503, 'at 8 of 10 a retry is refused')
  t.equal(await send({ 'retry-attempt': '7' }), 503, 'any retry')
  t.equal(await send(), 0, 'a first attempt still takes the 9th')
  t.equal(await send({ 'retry-attempt': '1' }), 0, '1 is a first attempt: the 10th')
  t.equal(await send(), 503, 'the gate is full for every one')
  t.match(app.admission.stats(), {
    admitted: 10,
    shed: 3,
    inFlight: 10,
    attempts: { first: { admitted: 6, shed: 1 }, retries: { admitted: 4, shed: 2 } }
  })
})

t.test('a header that cannot be read is a first attempt: it never gains priority, and never loses it', async (t) => {
  const { app, send } = await held(t, { maxInFlight: 6, retries: { reserve: 0.5 } })
  for (let i = 0; i < 3; i++) t.equal(await send(), 0)
  t.equal(await send(RETRY), 503, 'at 3 of 6 a retry is refused')
  for (const value of ['0', '-3', 'two']) t.equal(await send({ 'retry-attempt': value }), 0, `${JSON.stringify(value)}: a first attempt`)
  t.match(app.admission.stats().attempts, { first: { admitted: 6, shed: 0 }, retries: { admitted: 0, shed: 1 } })
})

t.test('on real sockets: the refused retry carries Retry-After and the in-flight policy; a first attempt is admitted', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: false, maxInFlight: { limit: 4, criticalReserve: 0 }, retries: { header: 'X-Attempt', reserve: 0.25 } })
  const hold = deferred()
  app.get('/', async () => { await hold.promise; return 'ok' })
  const port = await listen(app)
  const admitted = [get(port, '/'), get(port, '/'), get(port, '/')]
  t.ok(await eventually(() => app.admission.stats().inFlight === 3), 'three held')
  const retry = await request(`http://127.0.0.1:${port}/`, { headers: { 'x-attempt': '3' } })
  t.equal(retry.statusCode, 503, 'the retry is shed at 3 of 4')
  t.equal(retry.headers['retry-after'], '1')
  t.equal(retry.headers['ratelimit-policy'], '"in-flight";q=4;qu="concurrent-requests"')
  t.equal(retry.headers.ratelimit, '"in-flight";r=0')
  await retry.body.dump()
  // The default header's name means nothing where another is configured: a first attempt, the last slot.
  admitted.push(get(port, '/', { 'retry-attempt': '3' }))
  t.ok(await eventually(() => app.admission.stats().inFlight === 4), 'the fourth held')
  hold.resolve()
  t.same((await Promise.all(admitted)).map((a) => a.status), [200, 200, 200, 200])
})

t.test("a route's own semaphore keeps its last slots for first attempts too, named as the route's", async (t) => {
  const { app, send } = await held(t, { retries: { reserve: 0.2 } }, { admission: { maxInFlight: 5 } })
  t.same(app.admission.plan('GET /')!.onRequest, ['retryAttempt', 'inFlight', 'admit'])
  for (let i = 0; i < 4; i++) t.equal(await send(), 0)
  const refused = await app.inject({ url: '/', headers: RETRY })
  t.equal(refused.statusCode, 503, 'at 4 of 5 a retry is refused')
  t.equal(refused.headers['ratelimit-policy'], '"route-in-flight";q=5;qu="concurrent-requests"')
  t.equal(await send(), 0, 'a first attempt takes the 5th')
})

t.test('a reserve of no whole slot (share * L < 1) takes retries as first attempts', async (t) => {
  const { send } = await held(t, { maxInFlight: 5 })
  for (let i = 0; i < 5; i++) t.equal(await send(RETRY), 0, `retry ${i + 1}: 0.1 of 5 keeps no slot`)
  t.equal(await send(RETRY), 503, 'full')
})

t.test('retries: false takes a retry as any request; enforce: false only counts it', async (t) => {
  const off = await held(t, { maxInFlight: 2, retries: false })
  t.equal(await off.send(), 0)
  t.equal(await off.send(RETRY), 0, 'the last slot goes to a retry')
  t.equal(off.app.admission.stats().attempts, undefined, 'no attempt counts when off')
  const shadow = await held(t, { maxInFlight: 2, retries: { reserve: 0.5 }, enforce: false })
  t.equal(await shadow.send(), 0)
  t.equal(await shadow.send(RETRY), 0, 'would have been shed: it goes on')
  t.match(shadow.app.admission.stats(), { wouldShed: 1, shed: 0 })
})

t.test('the adaptive limit: the reserve follows the limit as it moves', async (t) => {
  const { app, send } = await held(t, { maxInFlight: { adaptive: true, min: 10, max: 10, initial: 10 }, retries: { reserve: 0.3 } })
  t.equal(app.admission.limit, 10)
  for (let i = 0; i < 7; i++) t.equal(await send(), 0)
  t.equal(await send(RETRY), 503, 'at 7 of 10')
})

t.test('while queueing delay stands a retry is shed whatever its age; a first attempt is judged by its own', async (t) => {
  // A clock that jumps 1 s at each read: every tick of the probe is late by far, so the controller
  // sees a standing queue after one interval; the first request of a turn of the loop is never old.
  let now = 0
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: false, queueDelay: { clock: () => (now += 1000) } })
  app.get('/', async () => 'ok')
  const port = await listen(app)
  t.ok(await eventually(() => app.admission.pressure()!.queueDelay!.standing), 'a standing queue')
  const first = await get(port, '/')
  t.equal(first.status, 200, 'a first attempt, the first of its turn: served')
  const retry = await get(port, '/', RETRY)
  t.equal(retry.status, 503, 'a retry: shed')
  t.equal(retry.headers['retry-after'], '1', "the queue's Retry-After")
  t.match(app.admission.stats(), { attempts: { retries: { shed: 1, admitted: 0 } }, pressure: { shed: { queueDelay: 1 } }, reasons: { 'queue-delay': 1 } })
})

t.test('options: a header of its own keeps the default reserve', async (t) => {
  const { send } = await held(t, { maxInFlight: 10, retries: { header: 'X-Try' } })
  for (let i = 0; i < 9; i++) t.equal(await send(), 0)
  t.equal(await send({ 'x-try': '2' }), 503, '0.1 of 10: the last slot is a first attempt\'s')
})

t.test('options: typed errors naming the option', async (t) => {
  const bad: Array<[unknown, string]> = [
    ['yes', 'retries'],
    [{ reserve: 1 }, 'retries.reserve'],
    [{ reserve: -0.1 }, 'retries.reserve'],
    [{ header: 'bad header' }, 'retries.header'],
    [{ header: 7 }, 'retries.header'],
    [{ heder: 'x' }, 'retries.heder']
  ]
  for (const [retries, path] of bad) {
    const app = Fastify()
    const error = await app.register(admission, { retries } as AdmissionOptions).ready().then(() => undefined, (e: unknown) => e)
    t.ok(error instanceof AdmissionOptionError, `${JSON.stringify(retries)}: an AdmissionOptionError`)
    t.equal((error as AdmissionOptionError).path, path)
    await app.close()
  }
})
