// The top offenders: the clients refused most for what they did (their quota, their in-flight
// limit) over the last minute, in stats().offenders — as digests unless the application asks for
// the keys themselves; the digest is the `pk` a client is sent when there is a partition key.
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import admission, { AdmissionOptionError, memoryBackend, type AdmissionOptions } from '../../lib/index.js'
import { deferred, eventually } from '../helpers/http.js'

const SECRET = 'a secret of sixteen characters or more'
const DIGEST = /^:[A-Za-z0-9+/]{22}==:$/

/** An app whose clients say who they are (`x-client`), with a quota of one request a minute on `GET /q`. */
async function appWith (t: Test, options: AdmissionOptions = {}): Promise<FastifyInstance> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: { limit: 1, windowMs: 60_000 }, key: (request) => String(request.headers['x-client']), ...options })
  app.get('/q', async () => 'ok')
  return app
}

/** `times` requests of `client` to `url`: their statuses. */
async function requests (app: FastifyInstance, client: string, times: number, url = '/q'): Promise<number[]> {
  const statuses: number[] = []
  for (let i = 0; i < times; i++) statuses.push((await app.inject({ url, headers: { 'x-client': client } })).statusCode)
  return statuses
}

/** `then()` while a request of `client` to `GET /slow` holds its permit; the held request then ends. */
async function whileHeld<T> (app: FastifyInstance, client: string, then: () => Promise<T>): Promise<T> {
  const gate = deferred()
  app.get('/slow', async () => { await gate.promise; return 'done' })
  // inject() starts a request once it is then-ed.
  const held = app.inject({ url: '/slow', headers: { 'x-client': client } }).then((response) => response)
  await eventually(() => app.admission.stats().routes['GET /slow']!.inFlight === 1)
  const result = await then()
  gate.resolve()
  await held
  return result
}

t.test('on by default: the clients refused most, most first, each as a digest of its key', async (t) => {
  const app = await appWith(t)
  t.same(app.admission.stats().offenders, [], 'nobody refused yet')
  t.same(await requests(app, 'alice', 4), [200, 429, 429, 429])
  t.same(await requests(app, 'bob', 2), [200, 429])
  await requests(app, 'carol', 1)
  const offenders = app.admission.stats().offenders!
  t.same(offenders.map((offender) => offender.refused), [3, 1], 'alice, then bob; carol was never refused')
  for (const { key } of offenders) t.match(key, DIGEST, 'a digest: 16 bytes, as pk writes them')
  t.not(offenders[0]!.key, offenders[1]!.key)
  t.same(app.admission.stats().offenders, offenders, 'the same digests at each read')
})

t.test('with a partition key, a client\'s digest is the pk it is sent', async (t) => {
  const app = await appWith(t, { headers: { partitionKey: SECRET } })
  await requests(app, 'alice', 1)
  const refused = await app.inject({ url: '/q', headers: { 'x-client': 'alice' } })
  t.equal(refused.statusCode, 429)
  const pk = /;pk=(:[^:]+:)/.exec(String(refused.headers.ratelimit))![1]
  t.same(app.admission.stats().offenders, [{ key: pk, refused: 1 }])
})

t.test('rawKeys: the keys themselves; top: how many', async (t) => {
  const app = await appWith(t, { offenders: { top: 2, rawKeys: true } })
  await requests(app, 'alice', 3)
  await requests(app, 'bob', 4)
  await requests(app, 'carol', 2)
  t.same(app.admission.stats().offenders, [{ key: 'bob', refused: 3 }, { key: 'alice', refused: 2 }])
  const digests = await appWith(t, { offenders: { top: 1 } })
  await requests(digests, 'alice', 3)
  t.match(digests.admission.stats().offenders, [{ key: DIGEST, refused: 2 }], 'top alone: digests')
})

t.test('offenders: false: no list, nothing kept', async (t) => {
  const app = await appWith(t, { offenders: false })
  await requests(app, 'alice', 3)
  t.equal('offenders' in app.admission.stats(), false)
})

t.test('only refusals for what the client did: not a full server, a backend that cannot decide, a dry run', async (t) => {
  t.test('a full server', async (t) => {
    const app = await appWith(t, { offenders: { rawKeys: true }, rateLimit: false, maxInFlight: 1 })
    t.same(await whileHeld(app, 'first', () => requests(app, 'second', 2, '/slow')), [503, 503], 'shed: not the client\'s doing')
    t.same(app.admission.stats().offenders, [])
  })
  t.test('a backend that cannot decide', async (t) => {
    const app = await appWith(t, { offenders: { rawKeys: true }, backend: memoryBackend({ maxIdentities: 1 }) })
    await requests(app, 'first', 1)
    t.same(await requests(app, 'second', 2), [503, 503], 'memory full of live state')
    t.same(app.admission.stats().offenders, [])
  })
  t.test('a dry run', async (t) => {
    const app = await appWith(t, { offenders: { rawKeys: true }, enforce: false })
    t.same(await requests(app, 'alice', 3), [200, 200, 200], 'enforce: false refuses nothing')
    t.same(app.admission.stats().offenders, [])
  })
})

t.test('a client at its in-flight limit is an offender', async (t) => {
  const app = await appWith(t, { offenders: { rawKeys: true }, rateLimit: false, clientInFlight: 1 })
  t.same(await whileHeld(app, 'greedy', () => requests(app, 'greedy', 2, '/slow')), [429, 429])
  t.same(app.admission.stats().offenders, [{ key: 'greedy', refused: 2 }])
})

t.test('a bad offenders option is refused at registration, naming it', async (t) => {
  const cases: Array<[unknown, string, RegExp]> = [
    ['yes', 'offenders', /a boolean, or an object \{ top\?, rawKeys\? \}/],
    [{ top: 0 }, 'offenders.top', /an integer from 1 to 100/],
    [{ top: 101 }, 'offenders.top', /an integer from 1 to 100/],
    [{ top: 1.5 }, 'offenders.top', /an integer from 1 to 100/],
    [{ rawKeys: 'yes' }, 'offenders.rawKeys', /a boolean/],
    [{ tops: 3 }, 'offenders.tops', /did you mean `top`/]
  ]
  for (const [offenders, path, message] of cases) {
    const app = Fastify()
    t.teardown(() => app.close())
    const error = await app.register(admission, { offenders } as AdmissionOptions).then(() => undefined, (error: unknown) => error)
    t.type(error, AdmissionOptionError)
    t.equal((error as AdmissionOptionError).path, path)
    t.match((error as Error).message, message)
  }
})
