// An ES module consumer of the published declarations (`dist/index.d.ts`, through the package's
// own `exports`), whatever the consumer's package type. Compiled under module node16 and nodenext.
import Fastify from 'fastify'
import admission, { memoryBackend, RatesError, type AdmissionOptions, type RatesBackend } from 'fastify-admission'
import { take, newBucket, limitConfig } from 'fastify-admission/core'

const app = Fastify()
const backend: RatesBackend = memoryBackend({ maxIdentities: 10_000 })
const options: AdmissionOptions = { maxInFlight: 512, backend, rateLimit: { limit: 100, windowMs: 60_000 } }
await app.register(admission, options)
// @ts-expect-error an unknown option
await app.register(admission, { maxInflight: 3 })

try {
  app.rates.use('send', { algorithm: 'fixed-window', limit: 1, windowMs: 1_000 })
} catch (error) {
  if (error instanceof RatesError) void error.code
}
const ok: boolean = take(newBucket(1, 0), limitConfig(1, 1, 1, 1), 0, 1).ok
void ok
