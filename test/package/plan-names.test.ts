// A plan's steps by name, as published: the bundler renames a function whose name another module
// also uses (a `clientKey` step and the `clientKey` of the client-key module), so each step is
// named where it is made. `npm test` builds first.
import t from 'tap'
import { createRequire } from 'node:module'
import Fastify from 'fastify'

const require = createRequire(import.meta.url)

for (const [format, load] of [['ESM', async () => (await import('fastify-admission')).default], ['CJS', async () => require('fastify-admission')]] as const) {
  t.test(`${format}: app.admission.plan() lists every step by its own name`, async (t) => {
    const admission = await load()
    const app = Fastify()
    t.teardown(() => app.close())
    await app.register(admission, { maxInFlight: 10, pressure: { maxHeapUsedBytes: 1e12 }, key: () => 'k' })
    app.get('/tiers', { config: { admission: { rateLimit: { tier: () => 'free', tiers: { free: { limit: 1, windowMs: 60_000 } } } } } }, async () => 'ok')
    await app.ready()
    t.same(app.admission.plan('GET /tiers'), {
      onRequest: ['retryAttempt', 'underPressure', 'inFlight', 'clientKey', 'pickTier'],
      preHandler: [],
      tiers: { free: ['decideNow', 'headersNow', 'verdict', 'exposed', 'admit'] }
    })
  })
}
