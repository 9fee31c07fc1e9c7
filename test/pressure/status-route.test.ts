// The status route (`pressure.exposeStatusRoute`) as whoever can reach it sees it: a route that
// collides with one of the application's fails the registration (catchable), and the route
// answers only what it was asked to expose.
import t from 'tap'
import Fastify from 'fastify'
import admission from '../../lib/index.js'

t.test('a status route colliding with a route of the application fails the registration, catchable, naming the path and the fix', async (t) => {
  for (const declare of ['before register', 'in a plugin registered before'] as const) {
    const app = Fastify()
    t.teardown(() => app.close())
    if (declare === 'before register') app.get('/status', async () => 'mine')
    else await app.register(async (child) => { child.get('/status', async () => 'mine') })
    let caught: unknown
    try {
      await app.register(admission, { rateLimit: false, pressure: { maxRssBytes: 1e15, exposeStatusRoute: true } })
      await app.ready()
    } catch (error) {
      caught = error
    }
    t.match(caught, {
      name: 'AdmissionOptionError',
      code: 'ADMISSION_INVALID_OPTION',
      path: 'pressure.exposeStatusRoute',
      message: /GET \/status is already declared.*exposeStatusRoute: \{ url: /
    }, declare)
    t.match((caught as { cause?: { code?: string } }).cause, { code: 'FST_ERR_DUPLICATED_ROUTE' }, 'Fastify\'s own error as the cause')
  }
})

t.test('any other error of the status route\'s declaration reaches register() too', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await t.rejects(async () => {
    await app.register(admission, { rateLimit: false, pressure: { maxRssBytes: 1e15, exposeStatusRoute: { routeOpts: { bodyLimit: 'x' as unknown as number } } } })
  }, { code: 'FST_ERR_ROUTE_BODY_LIMIT_OPTION_NOT_INT' })
})
