import t from 'tap'
import Fastify from 'fastify'
import admission from '../../lib/index.js'

t.test('two routes with one method and URL (constraints) get a gate each, named apart', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: false })
  app.get('/', { constraints: { version: '1.0.0' } }, async () => 'v1')
  app.get('/', { constraints: { version: '2.0.0' } }, async () => 'v2')
  app.get('/', { constraints: { version: '3.0.0' } }, async () => 'v3')
  t.equal((await app.inject({ url: '/', headers: { 'accept-version': '1.x' } })).body, 'v1')
  t.equal((await app.inject({ url: '/', headers: { 'accept-version': '2.x' } })).body, 'v2')
  t.equal((await app.inject({ url: '/', headers: { 'accept-version': '2.x' } })).body, 'v2')
  t.equal(app.admission.stats().routes['GET /']!.admitted, 1)
  t.equal(app.admission.stats().routes['GET / #2']!.admitted, 2)
  t.equal(app.admission.stats().routes['GET / #3']!.admitted, 0)
})

t.test('two routes given the same config object share nothing', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: false })
  const config = { admission: { maxInFlight: 1, rateLimit: { limit: 1, windowMs: 60_000 } } }
  app.get('/a', { config }, async () => 'a')
  app.get('/b', { config }, async () => 'b')
  t.equal((await app.inject('/a')).statusCode, 200)
  t.equal((await app.inject('/b')).statusCode, 200, 'a quota of its own: /a took the only unit of its own')
  t.equal((await app.inject('/a')).statusCode, 429)
  t.match(app.admission.stats().routes, { 'GET /a': { admitted: 1, limited: 1 }, 'GET /b': { admitted: 1, limited: 0 } })
})

t.test('GET and its automatic HEAD share one gate and quota, listed once', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: false })
  app.get('/', { config: { admission: { rateLimit: { limit: 2, windowMs: 60_000 } } } }, async () => 'ok')
  t.equal((await app.inject({ method: 'HEAD', url: '/' })).statusCode, 200)
  t.equal((await app.inject('/')).statusCode, 200)
  t.equal((await app.inject({ method: 'HEAD', url: '/' })).statusCode, 429)
  t.same(Object.keys(app.admission.stats().routes).sort(), ['404', 'GET /'])
  t.match(app.admission.stats().routes['GET /'], { admitted: 2, limited: 1 })
})
