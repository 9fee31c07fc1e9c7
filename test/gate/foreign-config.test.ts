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
  t.same(warned, ['GET /theirs', 'GET /both', 'POST,PUT /multi'], 'each route carrying the key once (not again for its HEAD twin), not an opted-out one')
  t.match(lines[0]!.msg, /config\.rateLimit \(@fastify\/rate-limit's option\), which this plugin does not read; this plugin's limit for the route is config\.admission\.rateLimit/)
  // The route still works, under the plugin's own limit (a token-bucket, a token every 12 s):
  // 3 left after two, the next back within 12 s.
  t.equal((await app.inject('/theirs')).statusCode, 200)
  t.equal((await app.inject('/theirs')).headers.ratelimit, '"default";r=3;t=12')
})

t.test("config: { rateLimit: false }, @fastify/rate-limit's opt-out, is warned with its own text where the route is now limited", async (t) => {
  const warnings = async (rateLimit: false | { limit: number, windowMs: number }): Promise<Array<{ msg: string, route?: string }>> => {
    const lines: Array<{ level: number, msg: string, route?: string }> = []
    const app = Fastify({ logger: { level: 'warn', stream: { write: (line: string) => { lines.push(JSON.parse(line)) } } } })
    t.teardown(() => app.close())
    await app.register(admission, { rateLimit })
    app.get('/health', { config: { rateLimit: false } } as object, async () => 'ok')
    app.get('/shed-only', { config: { rateLimit: false, admission: { rateLimit: false } } } as object, async () => 'ok')
    app.get('/own', { config: { rateLimit: false, admission: { rateLimit: { limit: 1, windowMs: 1000 } } } } as object, async () => 'ok')
    app.get('/out', { config: { rateLimit: false, admission: false } } as object, async () => 'ok')
    // A HEAD route declared by the application, without a GET: its own warning.
    app.head('/head', { config: { rateLimit: false } } as object, async () => 'ok')
    await app.ready()
    return lines.filter((l) => l.level === 40)
  }
  const limited = await warnings({ limit: 5, windowMs: 60_000 })
  t.same(limited.map((l) => l.route), ['GET /health', 'GET /own', 'HEAD /head'], 'the routes that were opted out and now are limited')
  t.match(limited[0]!.msg, "GET /health has config.rateLimit: false (@fastify/rate-limit's opt-out), which this plugin does not read: the route is rate limited by this plugin; to opt it out, give it config.admission: false")
  const unlimited = await warnings(false)
  t.same(unlimited.map((l) => l.route), ['GET /own'], 'with rateLimit: false, only a route with a limit of its own')
})
