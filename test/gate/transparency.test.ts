// What Fastify and other plugins see of a route is what the application declared: a gated route's
// handler keeps its kind (async or not), name and length for later `onRoute` hooks and in
// `request.routeOptions.handler`; an opted-out route keeps its handler and hooks as declared; and
// a registration before routes declared without `await` adds no `onSend` hook (Fastify's own
// suite, run with the plugin: test/fastify-suite).
import t from 'tap'
import Fastify, { type RouteOptions } from 'fastify'
import admission from '../../lib/index.js'

t.test('a gated route\'s handler is seen as declared: an async function, its name and length', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: { limit: 100, windowMs: 60_000 } })
  const seen = new Map<string, RouteOptions['handler']>()
  app.addHook('onRoute', (route) => { seen.set(`${String(route.method)} ${route.url}`, route.handler) })
  async function gatedHandler (request: { routeOptions: { handler: { constructor: { name: string }, length: number } } }): Promise<unknown> {
    return { kind: request.routeOptions.handler.constructor.name, length: request.routeOptions.handler.length }
  }
  app.get('/gated', gatedHandler as never)
  const declared = async function openHandler (): Promise<string> { return 'open' }
  app.get('/open', { config: { admission: false } }, declared)
  await app.ready()
  const gated = seen.get('GET /gated')!
  t.same([gated.constructor.name, gated.name, gated.length], ['AsyncFunction', 'gatedHandler', 1], 'a later onRoute hook sees an async handler of that name and length')
  t.same((await app.inject('/gated')).json(), { kind: 'AsyncFunction', length: 1 }, 'request.routeOptions.handler: the same kind')
  t.equal(seen.get('GET /open'), declared, 'an opted-out route keeps the very handler it was declared with')
  t.match(app.admission.stats().routes['GET /gated'], { admitted: 1 }, 'and the gated route is gated')
})

t.test('an opted-out route gets no hook of the plugin', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: { limit: 1, windowMs: 60_000 } })
  const hooks = new Map<string, unknown[]>()
  app.addHook('onRoute', (route) => {
    hooks.set(`${String(route.method)} ${route.url}`, ['onRequest', 'preHandler', 'onSend', 'onResponse'].flatMap((name) => [(route as unknown as Record<string, unknown>)[name] ?? []].flat()))
  })
  app.get('/open', { config: { admission: false } }, async () => 'open')
  app.get('/gated', async () => 'gated')
  await app.ready()
  t.same(hooks.get('GET /open'), [], 'no hook on the opted-out route')
  t.ok(hooks.get('GET /gated')!.length >= 2, 'the gated route has the gate\'s onRequest and onResponse')
  t.same([(await app.inject('/open')).statusCode, (await app.inject('/open')).statusCode], [200, 200])
})
