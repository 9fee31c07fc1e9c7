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

t.test('one error class identity across import and require: instanceof holds whichever build threw', async (t) => {
  const esm = await import('fastify-admission')
  const cjs = createRequire(import.meta.url)('fastify-admission') as typeof esm
  t.not(esm.AdmissionOptionError, cjs.AdmissionOptionError, 'two builds, two classes (the dual-package hazard)')
  const refusal = async (plugin: unknown): Promise<unknown> => {
    const app = Fastify()
    t.teardown(() => app.close())
    return await app.register(plugin as never, { maxInflight: 10 }).ready().then(() => undefined, (error: unknown) => error)
  }
  for (const [thrower, error] of [['require', await refusal(cjs)], ['import', await refusal(esm)]] as const) {
    for (const [by, mod] of [['import', esm], ['require', cjs]] as const) {
      t.ok(error instanceof mod.AdmissionOptionError, `thrown by the ${thrower}d build, an AdmissionOptionError of the ${by}ed one`)
      t.ok(error instanceof mod.AdmissionError)
      t.notOk(error instanceof mod.RatesError)
    }
  }
  const rates = (mod: typeof esm): unknown => {
    try {
      mod.memoryBackend({ maxIdentities: -1 })
    } catch (error) {
      return error
    }
  }
  const fromCjs = rates(cjs)
  t.ok(fromCjs instanceof esm.RatesInvalidArgumentError, "the rates capability's errors too")
  t.ok(fromCjs instanceof esm.RatesError)
  t.ok(rates(esm) instanceof cjs.RatesInvalidArgumentError)
  // Every error class of the package is branded, under its own name, in both builds.
  for (const name of ['AdmissionError', 'AdmissionOptionError', 'AdmissionCallbackError', 'RatesError', 'RatesInvalidArgumentError', 'RatesPolicyConflictError', 'RatesUnavailableError', 'RatesStoppedError'] as const) {
    for (const mod of [esm, cjs]) {
      t.equal(mod[name].name, name)
      t.equal((mod[name].prototype as unknown as Record<symbol, unknown>)[Symbol.for('fastify-admission.error-class')], `fastify-admission:${name}`, `${name} is branded`)
    }
  }
})

t.test('fastify-admission/client: the interceptor from ESM and CommonJS, without loading undici or the plugin', async (t) => {
  const esm = await import('fastify-admission/client')
  const cjs = createRequire(import.meta.url)('fastify-admission/client') as typeof esm
  for (const mod of [esm, cjs]) {
    t.type(mod.admissionRetry, 'function')
    t.equal(mod.RETRY_ATTEMPT_HEADER, 'retry-attempt')
    const retry = mod.admissionRetry({ maxRetries: 1 })
    t.type(retry(() => true), 'function', 'an interceptor: dispatch in, dispatch out')
    t.equal(retry.stats().requests, 0)
    t.throws(() => mod.admissionRetry({ maxRetries: -1 }), { code: 'ADMISSION_INVALID_OPTION', path: 'options.maxRetries' })
  }
  t.strictSame(Object.keys(esm).sort(), ['RETRY_ATTEMPT_HEADER', 'admissionRetry'])
})
