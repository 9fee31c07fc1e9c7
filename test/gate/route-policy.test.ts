import t, { type Test } from 'tap'
import Fastify from 'fastify'
import admission, { AdmissionOptionError, memoryBackend } from '../../lib/index.js'
import type { AdmissionOptions, AdmissionRouteOptions } from '../../lib/index.js'

// A route's partial policy takes the fields it leaves out from the plugin's one policy, as
// @fastify/rate-limit's route `max` takes the plugin's `timeWindow`.

async function routePolicy (t: Test, plugin: AdmissionOptions['rateLimit'], route: AdmissionRouteOptions['rateLimit'], clock?: () => number): Promise<{ policy: string | undefined, statuses: (n: number) => Promise<number[]> }> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { ...(plugin === undefined ? {} : { rateLimit: plugin }), ...(clock === undefined ? {} : { backend: memoryBackend({ clock }) }) })
  app.get('/x', { config: { admission: { rateLimit: route } } }, async () => 'ok')
  await app.ready()
  const policy = (await app.inject('/x')).headers['ratelimit-policy'] as string | undefined
  return {
    policy,
    statuses: async (n) => {
      const out: number[] = []
      for (let i = 0; i < n; i++) out.push((await app.inject('/x')).statusCode)
      return out
    }
  }
}

async function refused (t: Test, plugin: AdmissionOptions['rateLimit'], route: AdmissionRouteOptions['rateLimit']): Promise<AdmissionOptionError> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: plugin })
  app.get('/x', { config: { admission: { rateLimit: route } } }, async () => 'ok')
  const error = await app.ready().then(() => undefined, (e: unknown) => e)
  t.type(error, AdmissionOptionError)
  return error as AdmissionOptionError
}

t.test('limit alone takes the plugin\'s windowMs (and algorithm); its burst is its own limit, never the plugin\'s', async (t) => {
  t.equal((await routePolicy(t, { limit: 100, windowMs: 60_000 }, { limit: 6 })).policy, '"default";q=6;w=60')
  t.equal((await routePolicy(t, undefined, { limit: 6 })).policy, '"default";q=6;w=60', "the default plugin policy's window, 60 s")
  t.equal((await routePolicy(t, { limit: 100, windowMs: 60_000, burst: 200 }, { limit: 6 })).policy, '"default";q=6;w=60', 'a larger plugin burst is not taken')
  t.equal((await routePolicy(t, { limit: 100, windowMs: 60_000, burst: 200 }, { limit: 6, burst: 12 })).policy, '"default";q=12;w=120', 'a burst given is the route\'s')
})

t.test('windowMs alone takes the plugin\'s limit and burst', async (t) => {
  t.equal((await routePolicy(t, { limit: 100, windowMs: 60_000, burst: 20 }, { windowMs: 1_000 })).policy, '"default";q=20;w=1')
})

t.test('the algorithm is the plugin\'s when absent; another algorithm takes limit and windowMs but not the burst', async (t) => {
  let now = 10_000
  const fixed = await routePolicy(t, { algorithm: 'fixed-window', limit: 100, windowMs: 10_000 }, { limit: 3 }, () => now)
  t.same(await fixed.statuses(3), [200, 200, 429], 'three per window (one taken by the first request)')
  now += 3_400
  t.same(await fixed.statuses(1), [429], 'a fixed window: nothing back within it (a token bucket would have one)')
  t.equal((await routePolicy(t, { limit: 100, windowMs: 60_000, burst: 20 }, { algorithm: 'fixed-window' })).policy, '"default";q=100;w=60', 'no burst for a window algorithm')
  t.equal((await routePolicy(t, { limit: 100, windowMs: 60_000, burst: 20 }, { algorithm: 'gcra' })).policy, '"default";q=100;w=60', "gcra's own default burst, its limit")
})

t.test('under rateLimit: false a route takes the defaults (60 000 ms, 1000); a plugin list or tiers give nothing to take', async (t) => {
  t.equal((await routePolicy(t, false, { limit: 6 })).policy, '"default";q=6;w=60', "the default window, as a route's max under the peer's global: false")
  t.equal((await routePolicy(t, false, { windowMs: 1_000 })).policy, '"default";q=1000;w=1', 'the default limit')
  const list = [{ limit: 10, windowMs: 1_000 }, { limit: 100, windowMs: 60_000 }]
  const error = await refused(t, list, { limit: 6 })
  t.equal(error.path, 'config.admission of GET /x.rateLimit.windowMs')
  t.match(error.message, "a route's policy takes the fields it leaves out from the plugin's rateLimit when that is one policy, and from the defaults when it is false; not from a list or tiers")
  t.equal((await refused(t, list, { windowMs: 1_000 })).path, 'config.admission of GET /x.rateLimit.limit')
  t.equal((await refused(t, { limit: 100, windowMs: 60_000 }, [{ limit: 6 }] as never)).path, 'config.admission of GET /x.rateLimit[0].windowMs', 'a list is complete as given')
  t.equal((await routePolicy(t, list, { limit: 6, windowMs: 6_000, penalty: false })).policy, '"default";q=6;w=6', 'a whole policy needs nothing (penalty: false is none)')
  t.equal((await routePolicy(t, list, { limit: 6, windowMs: 6_000, penalty: 'restart' })).policy, '"default";q=6;w=6', 'its own penalty')
})

t.test("the plugin's one policy: each field left out is the default's", async (t) => {
  t.equal((await routePolicy(t, { limit: 100 }, {})).policy, '"default";q=100;w=60')
  t.equal((await routePolicy(t, { windowMs: 1_000 }, {})).policy, '"default";q=1000;w=1')
  t.equal((await routePolicy(t, { limit: 10, windowMs: 1_000, penalty: false }, {})).policy, '"default";q=10;w=1', 'penalty: false, none')
})
