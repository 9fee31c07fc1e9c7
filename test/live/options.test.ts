// The `live` option as an application writes it: off unless asked for, `true` for the defaults,
// and every wrong value refused at registration with an error naming it and what it should be.
import t from 'tap'
import Fastify from 'fastify'
import admission from '../../lib/index.js'
import type { AdmissionOptions } from '../../lib/index.js'

async function registered (live: unknown): Promise<{ page: number, data: number, error?: unknown }> {
  const app = Fastify()
  try {
    await app.register(admission, { live } as AdmissionOptions)
    await app.ready()
  } catch (error) {
    await app.close()
    return { page: 0, data: 0, error }
  }
  const page = (await app.inject('/admission/live')).statusCode
  const data = (await app.inject('/admission/live/data')).statusCode
  await app.close()
  return { page, data }
}

t.test('off by default and with false: no route', async (t) => {
  t.same(await registered(undefined), { page: 404, data: 404 })
  t.same(await registered(false), { page: 404, data: 404 })
})

t.test('true: the page and its data at /admission/live', async (t) => {
  t.same(await registered(true), { page: 200, data: 200 })
  t.same(await registered({}), { page: 200, data: 200 }, 'an empty object is the defaults too')
})

t.test('path: the page there and its data under it', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { live: { path: '/ops/gate' } })
  t.equal((await app.inject('/ops/gate')).statusCode, 200)
  t.equal((await app.inject('/ops/gate/data')).statusCode, 200)
  t.equal((await app.inject('/admission/live')).statusCode, 404)
})

t.test('a wrong value is refused at registration, naming the option and what it should be', async (t) => {
  const cases: Array<[unknown, string, RegExp]> = [
    ['yes', 'live', /true, false, or an object \{ path\?, auth\? \}/],
    [{ path: 'admission' }, 'live.path', /a path of one or more segments/],
    [{ path: '/' }, 'live.path', /a path of one or more segments/],
    [{ path: '/admission/' }, 'live.path', /a path of one or more segments/],
    [{ path: '/users/:id' }, 'live.path', /without `:`, `\*`/],
    [{ path: '/a*' }, 'live.path', /without `:`, `\*`/],
    [{ path: '/a?b' }, 'live.path', /a path/],
    [{ path: 7 }, 'live.path', /a path/],
    [{ auth: 'secret' }, 'live.auth', /a function \(request, reply\) => boolean/],
    [{ autch: () => true }, 'live.autch', /did you mean `auth`\?/]
  ]
  for (const [live, path, message] of cases) {
    const { error } = await registered(live)
    t.match(error, { name: 'AdmissionOptionError', code: 'ADMISSION_INVALID_OPTION', path, message }, JSON.stringify(live) ?? String(live))
  }
})

t.test('a page path an application route has fails the registration, catchable, naming the path and the fix', async (t) => {
  for (const taken of ['/admission/live', '/admission/live/data']) {
    const app = Fastify()
    t.teardown(() => app.close())
    app.get(taken, async () => 'mine')
    const error = await app.register(admission, { live: true }).then(() => undefined, (e: unknown) => e)
    t.match(error, { name: 'AdmissionOptionError', path: 'live.path', message: new RegExp(`GET ${taken} is already declared.*live: \\{ path: `) }, taken)
    t.match((error as { cause?: unknown }).cause, { code: 'FST_ERR_DUPLICATED_ROUTE' }, 'Fastify\'s own error as the cause')
  }
})

t.test('any other error of the routes\' declaration reaches register() as it is', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  app.addHook('onRoute', (route) => { if (route.url.startsWith('/admission/live')) throw new Error('no such route here') })
  await t.rejects(async () => { await app.register(admission, { live: true }) }, { message: 'no such route here' })
})
