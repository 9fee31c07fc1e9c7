// Type tests of the published declarations (resolved through the package's own `exports`).
// Each @ts-expect-error line must be an error, so a declaration that grows too loose fails here.
import Fastify, { type FastifyContextConfig, type FastifyRequest } from 'fastify'
import admission, {
  admission as named,
  AdmissionError,
  AdmissionOptionError,
  type AdmissionOptions,
  type AdmissionStats,
  type AdmissionRouteOptions
} from 'fastify-admission'

const app = Fastify()
await app.register(admission, {
  maxInFlight: 512,
  rateLimit: { limit: 100, windowMs: 60_000, burst: 20 },
  key: (request: FastifyRequest) => request.ip,
  onLimit: (_request, retryAfterMs: number) => { void retryAfterMs },
  limitStatusCode: 503,
  responseBody: 'text'
})
await app.register(named, { maxInFlight: false, rateLimit: false })

// @ts-expect-error an unknown option
await app.register(admission, { maxInflight: 3 })
// @ts-expect-error rateLimit needs windowMs
await app.register(admission, { rateLimit: { limit: 3 } })
// @ts-expect-error only 429 or 503
await app.register(admission, { limitStatusCode: 500 })
// @ts-expect-error the key is a string
await app.register(admission, { key: () => 42 })

app.get('/search', { config: { admission: { maxInFlight: 8, rateLimit: { limit: 10, windowMs: 1_000 }, cost: 2 } } }, async () => 'ok')
app.get('/health', { config: { admission: false } }, async () => 'ok')
// Route shorthands infer their config type from the argument, so misuse is checked on the
// augmented FastifyContextConfig itself (the options are validated at ready() as well).
// @ts-expect-error admission config is an object or false
const notBoolean: FastifyContextConfig = { admission: true }
// @ts-expect-error no such route option
const unknownKey: FastifyContextConfig = { admission: { limit: 3 } }
void notBoolean; void unknownKey

const stats: AdmissionStats = app.admission.stats()
const inFlight: number = stats.inFlight
const perRoute: number | undefined = stats.routes['GET /search']?.shed
void inFlight; void perRoute

const error: AdmissionError = new AdmissionOptionError('maxInFlight', 'a positive safe integer', 0)
const code: string = error.code
void code

const options: AdmissionOptions = { cost: 1 }
const route: AdmissionRouteOptions = { rateLimit: false }
void options; void route

// The @fastify/rate-limit parity options.
await app.register(admission, {
  responseBody: 'problem',
  errorResponseBuilder: (_request, context) => ({ statusCode: context.statusCode, reason: context.reason, wait: context.retryAfterSeconds }),
  allowList: ['10.0.0.0/8', 'ops'],
  allowListSkipsShedding: true,
  hook: 'onRequest',
  enforce: false
})
await app.register(admission, { allowList: (request, key: string) => request.ip === key, hook: 'preHandler' })
// @ts-expect-error the builder returns an object
await app.register(admission, { errorResponseBuilder: () => 'text' })
// @ts-expect-error only onRequest or preHandler
await app.register(admission, { hook: 'onSend' })
app.get('/grouped', { config: { admission: { groupId: 'search', hook: 'preHandler', enforce: true, allowList: ['::1'] } } }, async () => 'ok')
const wouldLimit: number = stats.wouldLimit + stats.wouldShed + stats.allowed
void wouldLimit
