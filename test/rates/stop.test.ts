// Stop semantics through the real plugin: after app.close(), use() throws and consume() rejects
// with RatesStoppedError; a decision already made stays made.
import t from 'tap'
import { spawnSync } from 'node:child_process'
import Fastify, { type FastifyInstance } from 'fastify'
import admission, { memoryBackend, RatesError, RatesStoppedError, type RateLimiter, type RatePolicy } from '../../lib/index.js'
import { rejection, thrown } from '../helpers/errors.js'

const T0 = 1_700_000_000_000
const P: RatePolicy = { algorithm: 'token-bucket', limit: 10, windowMs: 1000 }


t.test('after close: use() throws, consume() rejects, decisions made stay made', async (t) => {
  const clock = { now: T0 }
  const app = Fastify()
  await app.register(admission, { backend: memoryBackend({ clock: () => clock.now }) })
  let child!: FastifyInstance
  let childHandle!: RateLimiter
  let unseen!: FastifyInstance
  await app.register(async function plugin (c) {
    child = c
    childHandle = c.rates.use('send', P)
    await c.register(async function inner (i) { unseen = i })
  })
  await app.ready()
  const root = app.rates.use('send', P)
  const globalHandle = app.rates.global.use('egress', P)

  const before = await root.consume('u', { cost: 10 })
  const snapshot = { ...before }
  const denied = await root.consume('u')
  const deniedSnapshot = { ...denied }
  t.equal(denied.denied, true)
  // A decision in flight when close() begins: the memory backend has already decided.
  const inFlight = childHandle.consume('u')
  const identitiesBefore = app.admission.stats().identities
  t.equal(identitiesBefore, 2)

  await app.close()

  t.strictSame(await inFlight, { allowed: true, denied: false, remaining: 9, resetAt: T0 + 100, moreAt: T0 + 100 }, 'the in-flight decision stands')
  t.strictSame(before, snapshot, 'a decision made before close is unchanged')
  t.strictSame(denied, deniedSnapshot)

  for (const [where, rates] of [['root', app.rates], ['child', child.rates], ['a context first asked after close', unseen.rates]] as const) {
    for (const [scope, use] of [['own', rates.use], ['global', rates.global.use.bind(rates.global)]] as const) {
      const error = thrown(() => use('send', P))
      t.type(error, RatesStoppedError, `${where}, ${scope} scope: use() throws`)
      t.type(error, RatesError)
      t.match(error, { code: 'RATES_STOPPED', name: 'RatesStoppedError', limiterName: 'send' })
      t.match((error as Error).message, 'Rate limiter "send" has stopped')
    }
  }
  const nameless = thrown(() => app.rates.use(42 as never, P))
  t.type(nameless, RatesStoppedError, 'stopped comes first, even for a bad name')
  t.notOk('limiterName' in (nameless as object), 'no name to report')
  t.match((nameless as Error).message, 'The rates capability has stopped')
  t.type(thrown(() => app.rates.use('send', { bad: true } as never)), RatesStoppedError, 'and for a bad policy')

  for (const [where, handle] of [['root', root], ['child', childHandle], ['global', globalHandle]] as const) {
    const error = await rejection(t, () => handle.consume('u'))
    t.type(error, RatesStoppedError, `${where}: consume() rejects`)
    t.match(error, { code: 'RATES_STOPPED', limiterName: handle.name })
  }
  t.type(await rejection(t, () => root.consume(undefined as never)), RatesStoppedError, 'even with a bad identity')
  t.type(await rejection(t, () => root.consume('u', { cost: 1000 })), RatesStoppedError, 'even with a bad cost')
  t.equal(app.admission.stats().identities, 2, 'the backend was the application\'s: it is not stopped, its state stays')
})

t.test('a backend the plugin made is stopped on close', async (t) => {
  const app = Fastify()
  await app.register(admission)
  const handle = app.rates.use('send', P)
  t.equal((await handle.consume('u')).allowed, true)
  t.equal(app.admission.stats().identities, 1)
  await app.close()
  t.equal(app.admission.stats().identities, 0, 'the default memory backend forgets its state on close')
  t.type(await rejection(t, () => handle.consume('u')), RatesStoppedError)
})

t.test('closing one app does not stop a backend it shares with another', async (t) => {
  // The plugin stops only a backend it made: a backend the application passed may serve others.
  const clock = { now: T0 }
  const shared = memoryBackend({ clock: () => clock.now })
  const first = Fastify()
  const second = Fastify()
  t.teardown(() => second.close())
  await first.register(admission, { backend: shared })
  await second.register(admission, { backend: shared })
  await first.ready()
  await second.ready()
  const handle = second.rates.use('send', P)
  t.equal((await handle.consume('u')).allowed, true)
  const firstHandle = first.rates.use('mine', P)
  await first.close()
  t.equal(shared.isStopped, false)
  t.match(await handle.consume('u'), { allowed: true, remaining: 8 }, 'the other app goes on, its state intact')
  t.equal(second.rates.use('other', P).name, 'other')
  t.type(await rejection(t, () => firstHandle.consume('u')), RatesStoppedError, 'the closed app\'s own handles stop')
})

t.test('a stopped memory backend, used directly', async (t) => {
  const backend = memoryBackend()
  const limiter = backend.limiter('somewhere', { algorithm: 'gcra', limit: 1, windowMs: 1000, burst: 1 })
  t.equal(backend.isStopped, false)
  await backend.stop()
  t.equal(backend.isStopped, true)
  t.type(thrown(() => backend.limiter('elsewhere', { algorithm: 'gcra', limit: 1, windowMs: 1000, burst: 1 })), RatesStoppedError)
  await t.rejects(limiter.consume('su', 1), RatesStoppedError)
  t.equal(backend.identities, 0)
  await backend.stop()
  t.pass('stop twice is fine')
})

// Guards a stopped backend at registration reaching ready() as an error (run in a child process, it used to crash it).
t.test('registering on a stopped backend fails register()/ready(), never the process', async (t) => {
  const script = `
    import Fastify from 'fastify'
    import admission, { memoryBackend } from './lib/index.ts'
    const backend = memoryBackend()
    await backend.stop()
    const second = Fastify()
    try {
      await second.register(admission, { backend })
      await second.ready()
      console.log('ready')
    } catch (error) {
      console.log('rejected ' + error.code)
    }
  `
  const run = spawnSync(process.execPath, [...process.execArgv, '--input-type=module', '-e', script], { cwd: process.cwd(), encoding: 'utf8', timeout: 30_000 })
  t.equal(run.status, 0, `the process survives (stderr: ${run.stderr.split('\n').slice(0, 8).join(' | ')})`)
  t.equal(run.stdout.trim(), 'rejected RATES_STOPPED')
})
