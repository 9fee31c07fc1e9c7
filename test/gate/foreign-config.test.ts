import t from 'tap'
import Fastify from 'fastify'
import admission from '../../lib/index.js'

t.test('a route with @fastify/rate-limit\'s config.rateLimit is warned about once at startup, not refused', async (t) => {
  const lines: Array<{ level: number, msg: string, route?: string }> = []
  const app = Fastify({ logger: { level: 'warn', stream: { write: (line: string) => { lines.push(JSON.parse(line)) } } } })
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: { limit: 5, windowMs: 60_000 } })
  app.get('/theirs', { config: { rateLimit: { max: 1 } } } as object, async () => 'ok')
  app.get('/both', { config: { rateLimit: { max: 1 }, admission: { cost: 2 } } } as object, async () => 'ok')
  app.get('/out', { config: { rateLimit: { max: 1 }, admission: false } } as object, async () => 'ok')
  app.get('/ours', { config: { admission: { cost: 2 } } }, async () => 'ok')
  app.get('/plain', async () => 'ok')
  app.route({ method: ['POST', 'PUT'], url: '/multi', config: { rateLimit: { max: 1 } } as object, handler: async () => 'ok' })
  await app.ready()
  const warned = lines.filter((l) => l.level === 40).map((l) => l.route)
  t.same(warned, ['GET /theirs', 'HEAD /theirs', 'GET /both', 'HEAD /both', 'POST,PUT /multi'], 'each route carrying the key, not an opted-out one')
  t.match(lines[0]!.msg, /config\.rateLimit \(@fastify\/rate-limit's option\), which this plugin does not read; this plugin's limit for the route is config\.admission\.rateLimit/)
  // The route still works, under the plugin's own limit.
  t.equal((await app.inject('/theirs')).statusCode, 200)
  t.equal((await app.inject('/theirs')).headers.ratelimit, '"default";r=3;t=24')
})
