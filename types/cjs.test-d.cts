// A CommonJS consumer of the published declarations (`dist/index.d.cts`, through the package's own
// `exports`): `require('fastify-admission')` is the plugin itself, its named exports as
// properties, and its named types reachable as `admission.X`. Compiled under module node16 and
// nodenext (types/tsconfig.json, types/tsconfig.node16.json).
import Fastify = require('fastify')
import admission = require('fastify-admission')
import core = require('fastify-admission/core')
import client = require('fastify-admission/client')
import undici = require('undici')
import viaDefault from 'fastify-admission'

const { memoryBackend, redisBackend, RatesError, RatesPolicyConflictError, AdmissionOptionError } = admission

async function main (): Promise<void> {
  const app = Fastify()
  await app.register(admission, {
    maxInFlight: 512,
    backend: memoryBackend({ maxIdentities: 10_000 }),
    rateLimit: { algorithm: 'gcra', limit: 100, windowMs: 60_000, burst: 20 },
    key: (request) => request.ip
  })
  await app.register(admission.admission, { maxInFlight: false, rateLimit: false })
  await app.register(admission.default, { maxInFlight: 8 })
  // @ts-expect-error an unknown option
  await app.register(admission, { maxInflight: 3 })
  // One policy's fields left out are the defaults' (1000 per 60 000 ms); a route's drops the plugin's penalty with false.
  await app.register(admission, { rateLimit: { limit: 3, penalty: false } })
  // @ts-expect-error a limit is a number
  await app.register(admission, { rateLimit: { limit: '3' } })

  const options: admission.AdmissionOptions = { maxInFlight: 4, refusal: { limitStatusCode: 503 } }
  const backend: admission.RatesBackend = memoryBackend()
  const memory: admission.MemoryBackend = new admission.MemoryBackend({ maxIdentities: 1 })
  const redis: admission.RedisBackend = redisBackend({ client: {} as admission.RedisBackendOptions['client'] })
  void options; void backend; void memory; void redis

  const send: admission.RateLimiter = app.rates.use('send', { algorithm: 'fixed-window', limit: 1, windowMs: 1_000 })
  const decision: admission.RateDecision = await send.consume('user-1')
  void decision.remaining
  const limits: admission.StackedRateLimiter = app.rates.use('limits', [{ algorithm: 'gcra', limit: 10, windowMs: 1_000 }, { algorithm: 'fixed-window', limit: 100, windowMs: 60_000 }])
  const stacked: admission.StackDecision = await limits.check('user-1')
  const outcome: admission.StackDecision['policies'][number] | undefined = stacked.policies[0]
  void outcome
  const stats: admission.AdmissionStats = app.admission.stats()
  void stats.inFlight

  try {
    app.rates.use('send', { algorithm: 'gcra', limit: 2, windowMs: 1_000 })
  } catch (error) {
    if (error instanceof RatesError) {
      const code: admission.RatesError['code'] = error.code
      void code
    }
    if (error instanceof RatesPolicyConflictError && 'algorithm' in error.existing) void error.existing.algorithm
    const typed: admission.RatesError | undefined = error instanceof admission.RatesError ? error : undefined
    void typed
  }
  const invalid: admission.AdmissionError = new AdmissionOptionError('maxInFlight', 'a positive safe integer', 0)
  void invalid.code

  // @ts-expect-error the CommonJS export is the plugin, not a namespace without a call signature
  admission.notAnExport()

  const ok: boolean = core.take(core.newBucket(1, 0), core.limitConfig(1, 1, 1, 1), 0, 1).ok
  void ok
}
void main

// The client entry: named exports, composed into undici's Agent.
const retry: client.AdmissionRetryInterceptor = client.admissionRetry({ maxRetries: 1 })
void new undici.Agent().compose(retry)
const counted: client.AdmissionRetryStats = retry.stats()
void counted

// The default import (esModuleInterop, implied by node16) is the same plugin.
void Fastify().register(viaDefault, { maxInFlight: 1 })
