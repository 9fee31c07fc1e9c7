// A client's in-flight limit across a fleet (`clientInFlight` on Redis): one sorted set per client,
// a member per slot held, scored with when it lapses; renewed while held, so a SIGKILLed process's
// slots are free within CLIENT_SLOT_TTL_MS of its death. The scripted part runs without a server.
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import { spawn } from 'node:child_process'
import type { Redis } from 'ioredis'
import admission, { redisBackend, type AdmissionOptions, type RatesBackend } from '../../../lib/index.js'
import type { RedisScriptClient } from '../../../lib/backends/redis/redis-backend.js'
import { CLIENT_SLOT_REFRESH_MS, CLIENT_SLOT_TTL_MS } from '../../../lib/backends/redis/client-slots.js'
import { deferred, eventually, getThenAbort, listen } from '../../helpers/http.js'
import { deleteKeys, sharedRedis, uniquePrefix, until } from './helpers.js'

const key = (request: { headers: Record<string, unknown> }): string => String(request.headers['x-client'])
const as = (client: string): Record<string, string> => ({ 'x-client': client })
const inFlight = (app: FastifyInstance): number => Object.values(app.admission.stats().routes).reduce((n, route) => n + route.inFlight, 0)

/** A client whose every EVAL is answered by `answer` (from the script's first line and its args). */
function scripted (answer: (script: string, args: string[]) => Promise<unknown>): RedisScriptClient & { calls: string[][] } {
  const calls: string[][] = []
  return {
    calls,
    // The scripts are sent by SHA first: a server that does not know them yet says NOSCRIPT, and the source follows.
    evalsha: () => Promise.reject(new Error('NOSCRIPT No matching script. Please use EVAL.')),
    eval (script: string, _numKeys: number, ...rest: string[]) {
      calls.push([script.includes("'ZCARD'") ? 'take' : script.includes("'XX'") ? 'renew' : 'release', ...rest])
      return answer(script, rest)
    }
  }
}

/**
 * An app whose handler holds each request until `release()`; `waiting()` counts the handlers
 * holding now. A test releases once its requests are in the handler, not once they hold a permit:
 * on a busy machine a request may hold its permit a while before its handler starts, and it would
 * then wait for the next release.
 */
async function gated (t: Test, backend: RatesBackend, options: AdmissionOptions = {}): Promise<{ app: FastifyInstance, release: () => void, waiting: () => number }> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend, rateLimit: false, key, clientInFlight: 2, ...options })
  let hold = deferred()
  let waiting = 0
  app.get('/', async () => {
    waiting++
    await hold.promise
    waiting--
    return 'ok'
  })
  await app.ready()
  return { app, release: () => { hold.resolve(); hold = deferred() }, waiting: () => waiting }
}

t.test('scripted: the step takes by promise, refuses at the limit, gives back at the end and on a permit already gone', async (t) => {
  let room = true
  const client = scripted(async (script) => script.includes("'ZCARD'") ? (room ? 1 : 0) : 1)
  const { app, release, waiting } = await gated(t, redisBackend({ client, prefix: 'p:' }))
  t.same(app.admission.plan('GET /')!.onRequest, ['inFlight', 'clientKey', 'clientInFlight', 'admit'])
  const first = app.inject({ url: '/', headers: as('x') })
  await eventually(() => inFlight(app) === 1 && waiting() === 1)
  t.match(client.calls[0], ['take', /^p:\{cif:.*\|\*:x\}$/, /^\d+-[0-9a-f]+:0$/, '2', String(CLIENT_SLOT_TTL_MS)], "one sorted set per client, the plugin's address")
  room = false
  const refused = await app.inject({ url: '/', headers: as('x') })
  t.equal(refused.statusCode, 429)
  t.equal(refused.headers['ratelimit-policy'], '"client-in-flight";q=2;qu="concurrent-requests"')
  await until(() => client.calls.some((call) => call[0] === 'renew'))
  t.pass(`a held slot is renewed every ${CLIENT_SLOT_REFRESH_MS} ms`)
  release()
  t.equal((await first).statusCode, 200)
  await until(() => client.calls.some((call) => call[0] === 'release'))
  t.equal(client.calls.find((call) => call[0] === 'release')![2], client.calls[0]![2], 'the member taken goes back')
})

t.test('scripted: a permit that ended before its slot came gives it back; a backend that fails answers by onBackendError', async (t) => {
  const answered = deferred()
  let failing = false
  const client = scripted(async (script) => {
    if (failing) throw new Error('connection lost')
    if (script.includes("'ZCARD'")) { await answered.promise; return 1 }
    return 1
  })
  // A route declared before the plugin is gated by its context's hooks; its handler is not
  // followed, so its permit ends as soon as its client leaves — here, while its slot is on its way.
  const app = Fastify()
  t.teardown(() => app.close())
  app.get('/', async () => 'ok')
  await app.register(admission, { backend: redisBackend({ client, prefix: 'p:' }), rateLimit: false, key, clientInFlight: 2 })
  const port = await listen(app)
  const asked = until(() => client.calls.length >= 1)
  await getThenAbort(port, '/', asked)
  await until(() => app.admission.stats().routes['GET /']?.inFlight === 0)
  answered.resolve()
  await until(() => client.calls.some((call) => call[0] === 'release'))
  t.pass('the slot taken for a request already gone went back at once')
  failing = true
  const denied = await app.inject({ url: '/', headers: as('y') })
  t.equal(denied.statusCode, 503, "onBackendError 'deny': 503")
  t.match(app.admission.stats(), { unavailable: 1 })
  const open = await gated(t, redisBackend({ client, prefix: 'q:' }), { onBackendError: 'allow' })
  const allowed = open.app.inject({ url: '/', headers: as('y') })
  await until(() => inFlight(open.app) === 1 && open.waiting() === 1)
  open.release()
  t.equal((await allowed).statusCode, 200, "onBackendError 'allow': admitted, holding no client slot")
})

t.test('scripted: a refused slot for a request already gone is nothing to give back; releases and renewals that fail are left to the TTL', async (t) => {
  const answered = deferred()
  let failing = false
  const client = scripted(async (script) => {
    if (script.includes("'ZCARD'")) { await answered.promise; return failing ? 1 : 0 }
    throw new Error('connection lost')
  })
  const app = Fastify()
  t.teardown(() => app.close())
  app.get('/', async () => 'ok')
  await app.register(admission, { backend: redisBackend({ client, prefix: 'p:' }), rateLimit: false, key, clientInFlight: 2 })
  const port = await listen(app)
  await getThenAbort(port, '/', until(() => client.calls.length >= 1))
  await until(() => app.admission.stats().routes['GET /']?.inFlight === 0)
  answered.resolve()
  await until(() => app.admission.stats().limited === 0 && client.calls.length === 1)
  t.equal(client.calls.filter((call) => call[0] === 'release').length, 0, 'refused: nothing held, nothing released')
  failing = true
  const book = redisBackend({ client, prefix: 'q:' }).clientSlots!('a')
  t.equal(await book.take('x', 1), true)
  await until(() => client.calls.some((call) => call[0] === 'renew'))
  book.release('x')
  await until(() => client.calls.some((call) => call[0] === 'release'))
  t.pass('a failed renewal and a failed release reject nothing: their slot lapses')
  await book.stop()
})

t.test('scripted: a logger that throws as the fleet\'s slot is refused: a 500, nothing unhandled', async (t) => {
  const noop = (): void => {}
  const logger = { level: 'debug', fatal: noop, error: noop, warn: noop, info: noop, trace: noop, debug: noop, child: (): unknown => child }
  const child = { ...logger, debug: (): void => { throw new Error('logger bug') }, child: (): unknown => child }
  const app = Fastify({ loggerInstance: logger as unknown as FastifyInstance['log'] })
  t.teardown(() => app.close())
  await app.register(admission, { backend: redisBackend({ client: scripted(async () => 0), prefix: 'p:' }), rateLimit: false, key, clientInFlight: 1 })
  app.get('/', async () => 'ok')
  const res = await app.inject({ url: '/', headers: as('x') })
  t.equal(res.statusCode, 500)
  t.match(res.json(), { message: 'logger bug' })
})

t.test('scripted: close gives back what is held; a stopped backend makes no book', async (t) => {
  const client = scripted(async () => 1)
  const backend = redisBackend({ client, prefix: 'p:' })
  const book = backend.clientSlots!('a')
  t.equal(await book.take('x', 5), true)
  t.equal(await book.take('x', 5), true)
  book.release('x')
  await book.stop()
  t.equal(client.calls.filter((call) => call[0] === 'release').length, 2, 'one released, one given back at stop')
  await backend.stop()
  t.throws(() => backend.clientSlots!('a'), { code: 'RATES_STOPPED' })
})

const shared = await sharedRedis()
const skip = 'skip' in shared ? shared.skip : false
const redis = 'redis' in shared ? shared.redis : (undefined as unknown as Redis)
if (!skip) t.teardown(() => redis.quit())

t.test('on Redis: two processes share a client\'s limit', { skip }, async (t) => {
  const prefix = uniquePrefix('cif')
  t.teardown(() => deleteKeys(redis, prefix))
  const one = await gated(t, redisBackend({ client: redis, prefix, timeoutMs: 5000 }))
  const two = await gated(t, redisBackend({ client: redis, prefix, timeoutMs: 5000 }))
  const held = [one.app.inject({ url: '/', headers: as('x') }), two.app.inject({ url: '/', headers: as('x') })]
  await until(() => one.waiting() === 1 && two.waiting() === 1)
  t.equal((await one.app.inject({ url: '/', headers: as('x') })).statusCode, 429, 'the fleet holds two of x')
  t.equal((await two.app.inject({ url: '/', headers: as('x') })).statusCode, 429)
  const other = two.app.inject({ url: '/', headers: as('y') })
  await until(() => two.waiting() === 2)
  one.release()
  two.release()
  t.same((await Promise.all([...held, other])).map((r) => r.statusCode), [200, 200, 200])
  const again = one.app.inject({ url: '/', headers: as('x') })
  await until(() => one.waiting() === 1)
  one.release()
  t.equal((await again).statusCode, 200, 'the slots came back')
})

// A long timeout: a loaded machine starts a child that loads TypeScript slowly (a wait, not a measure).
t.test(`on Redis: a SIGKILLed process's slots are free within ${CLIENT_SLOT_TTL_MS} ms of its death`, { skip, timeout: 180_000 }, async (t) => {
  const prefix = uniquePrefix('cif-kill')
  t.teardown(() => deleteKeys(redis, prefix))
  const child = spawn(process.execPath, [...process.execArgv, new URL('./client-slots-child.ts', import.meta.url).pathname], {
    env: { ...process.env, REDIS_URL: (shared as { url: string }).url, PREFIX: prefix, ADDRESS: 'fleet', SLOTS: '3', _TAPJS_PROCESSINFO_COVERAGE_: '0' },
    stdio: ['ignore', 'pipe', 'inherit']
  })
  t.teardown(() => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL') })
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => { if (chunk.toString().includes('holding')) resolve() })
    child.once('exit', (code) => { reject(new Error(`the child exited (${String(code)}) before holding its slots`)) })
  })
  const book = redisBackend({ client: redis, prefix, timeoutMs: 5000 }).clientSlots!('fleet')
  t.equal(await book.take('x', 3), false, 'the child holds all three')
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.kill('SIGKILL')
  await exited
  // The bound: each slot lapses CLIENT_SLOT_TTL_MS after its last renewal, which was before the
  // kill. Polled against a deadline from the bound (plus a margin for a loaded machine), never timed.
  const deadline = Date.now() + CLIENT_SLOT_TTL_MS + 5_000
  let free = false
  while (!free && Date.now() < deadline) {
    free = await book.take('x', 3)
    if (!free) await new Promise((resolve) => setTimeout(resolve, 100))
  }
  t.ok(free, 'a slot is free again within the bound')
  t.equal(await book.take('x', 3), true)
  t.equal(await book.take('x', 3), true, 'all three')
  t.equal(await book.take('x', 3), false, 'and no more')
  await book.stop()
})
