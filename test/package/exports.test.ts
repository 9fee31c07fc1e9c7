import t from 'tap'
import Fastify from 'fastify'
import { createRequire } from 'node:module'
import type { Teardown } from '../helpers/http.js'

// The published shape: the built package, reached by its own name through `exports`, from ESM
// and from CommonJS. `npm test` builds first.

async function refusesSecondRequest (t: Teardown & { equal: (a: unknown, b: unknown) => boolean }, plugin: unknown): Promise<void> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(plugin as never, { rateLimit: { limit: 1, windowMs: 60_000 } })
  app.get('/', async () => 'ok')
  t.equal((await app.inject('/')).statusCode, 200)
  t.equal((await app.inject('/')).statusCode, 429)
}

t.test('import: default and named exports, errors and the core', async (t) => {
  const mod = await import('fastify-admission')
  t.type(mod.default, 'function')
  t.equal(mod.admission, mod.default)
  t.type(mod.AdmissionOptionError, 'function')
  t.ok(new mod.AdmissionOptionError('x', 'y', 1) instanceof mod.AdmissionError)
  await refusesSecondRequest(t, mod.default)
  const core = await import('fastify-admission/core')
  t.equal(core.take(core.newBucket(1, 0), core.limitConfig(1, 1, 1, 1), 0, 1).ok, true)
})

t.test('require: the plugin itself, with its named exports', async (t) => {
  const require = createRequire(import.meta.url)
  const mod = require('fastify-admission')
  t.type(mod, 'function')
  t.equal(mod.default, mod)
  t.type(mod.admission, 'function')
  t.type(mod.AdmissionError, 'function')
  await refusesSecondRequest(t, mod)
  const core = require('fastify-admission/core')
  t.equal(core.LIM_ERR_PARAM, 1)
  t.equal(core.rejection503(3).headers['retry-after'], '3')
})
