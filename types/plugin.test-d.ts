// Type tests of the published declarations (resolved through the package's own `exports`).
// Each @ts-expect-error line must be an error, so a declaration that grows too loose fails here.
import Fastify, { type FastifyContextConfig, type FastifyRequest } from 'fastify'
import admission, {
  admission as named,
  AdmissionError,
  AdmissionOptionError,
  AdmissionRefusalError,
  type AdmissionOptions,
  type AdmissionStats,
  type AdmissionRouteOptions,
  normalizeIP,
  TYPE_EVENT_LOOP_DELAY
} from 'fastify-admission'

const app = Fastify()
await app.register(admission, {
  maxInFlight: 512,
  rateLimit: { limit: 100, windowMs: 60_000, burst: 20 },
  key: (request: FastifyRequest) => request.ip,
  onLimit: (_request, retryAfterMs: number) => { void retryAfterMs },
  refusal: { body: 'text', limitStatusCode: 503, fast: 'all' }
})
await app.register(admission, { refusal: { fast: false } })
await app.register(admission, { refusal: 'error' })
app.setErrorHandler((error, _request, reply) => {
  if (error instanceof AdmissionRefusalError) {
    const seconds: number = error.retryAfterSeconds
    const status: 429 | 503 = error.statusCode
    const code: 'ADMISSION_LIMITED' | 'ADMISSION_SHED' | 'ADMISSION_UNAVAILABLE' = error.code
    return reply.code(status).send({ seconds, code, reason: error.reason })
  }
  return reply.send(error)
})
// @ts-expect-error 'shed', 'all' or false
await app.register(admission, { refusal: { fast: true } })
await app.register(admission, { rateLimit: { limit: 100, windowMs: 60_000, penalty: 'restart' } })
await app.register(admission, { rateLimit: { limit: 100, windowMs: 60_000, penalty: { mode: 'double', maxMs: 3_600_000 } } })
app.get('/strict', { config: { admission: { rateLimit: { penalty: 'double' }, onBackendError: 'allow' } } }, async () => 'ok')
// @ts-expect-error 'restart' or 'double'
await app.register(admission, { rateLimit: { limit: 100, windowMs: 60_000, penalty: 'forever' } })
// @ts-expect-error a penalty is for a single policy, not one of a list
await app.register(admission, { rateLimit: [{ limit: 100, windowMs: 60_000, penalty: 'restart' }] })
await app.register(named, { maxInFlight: false, rateLimit: false })
// The live page: true, or where and for whom (auth answers a boolean, or a promise of one).
await app.register(admission, { live: true })
await app.register(admission, { live: { path: '/ops/admission', auth: (request, reply) => { void reply; return request.headers.authorization === 'Bearer x' } } })
await app.register(admission, { live: { auth: async () => true } })
// @ts-expect-error auth answers a boolean
await app.register(admission, { live: { auth: () => 'yes' } })
// @ts-expect-error a path is a string
await app.register(admission, { live: { path: 7 } })

// @ts-expect-error an unknown option
await app.register(admission, { maxInflight: 3 })
// One policy's fields left out are the defaults' (1000 per 60 000 ms); a route's drops the plugin's penalty with false.
await app.register(admission, { rateLimit: { limit: 3, penalty: false } })
// @ts-expect-error a limit is a number
await app.register(admission, { rateLimit: { limit: '3' } })
// @ts-expect-error only 429 or 503
await app.register(admission, { refusal: { limitStatusCode: 500 } })
// @ts-expect-error a body the gate knows
await app.register(admission, { refusal: 'html' })
// @ts-expect-error an option now part of another (refusal.limitStatusCode)
await app.register(admission, { limitStatusCode: 503 })
// @ts-expect-error the memory backend's bound is its own option
await app.register(admission, { maxIdentities: 10 })
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

// The adaptive limit and priorities.
const adaptive: Extract<AdmissionOptions['maxInFlight'], { adaptive: true }> = { adaptive: true, min: 2, max: 200, initial: 20, tolerance: 1.5, probeIntervalMs: 5000 }
await app.register(admission, { maxInFlight: { ...adaptive, criticalReserve: 0.25 } })
await app.register(admission, { maxInFlight: { limit: 100, criticalReserve: 0.1 } })
await app.register(admission, { maxInFlight: { limit: 'auto', criticalReserve: 0.1 } })
// @ts-expect-error the reserve is a share of the limit, written with it
await app.register(admission, { maxInFlight: 100, criticalReserve: 0.1 })
await app.register(admission, { maxInFlight: { adaptive: true } })
// @ts-expect-error adaptive is true (a fixed limit is a number)
await app.register(admission, { maxInFlight: { adaptive: false } })
// @ts-expect-error no such adaptive option
await app.register(admission, { maxInFlight: { adaptive: true, smoothing: 0.5 } })
const priority: AdmissionRouteOptions['priority'] = 'critical'
app.get('/checkout', { config: { admission: { priority } } }, async () => 'ok')
// @ts-expect-error critical, normal or sheddable
const badPriority: FastifyContextConfig = { admission: { priority: 'high' } }
void badPriority
// In a route's options literal Fastify adds the inferred config type to the declared one, so a
// typo is caught with `satisfies` (and at ready() in any case); the message names the allowed values.
// @ts-expect-error no such route option (maxInflight for maxInFlight)
app.get('/typo', { config: { admission: { maxInflight: 3 } satisfies AdmissionRouteOptions } }, async () => 'ok')
// @ts-expect-error critical, normal or sheddable
app.get('/high', { config: { admission: { priority: 'high' } satisfies AdmissionRouteOptions } }, async () => 'ok')
app.get('/partial', { config: { admission: { rateLimit: { limit: 6 } } satisfies AdmissionRouteOptions } }, async () => 'ok')
const delayType: 'eventLoopDelay' = TYPE_EVENT_LOOP_DELAY
const key: string = normalizeIP('::1', 64)
void delayType; void key
// @ts-expect-error an address is a string
normalizeIP(1)
const limit: number | false = app.admission.limit
const statsLimit: number | false = stats.limit
void limit; void statsLimit

const options: AdmissionOptions = { cost: 1 }
const route: AdmissionRouteOptions = { rateLimit: false }
void options; void route

// Pressure, as @fastify/under-pressure, and the queueing-delay shedder.
await app.register(admission, {
  queueDelay: { targetMs: 5, intervalMs: 100 },
  pressure: {
    maxEventLoopDelay: 1000,
    maxEventLoopUtilization: 0.98,
    exposeStatusRoute: { url: '/alive', routeOpts: { logLevel: 'debug' } },
    healthCheck: async () => true,
    healthCheckInterval: 500,
    pressureHandler: (_request, reply, type, value: number | undefined) => { void reply.send({ type, value }) }
  }
})
await app.register(admission, { queueDelay: true })
// @ts-expect-error queueDelay is a boolean or an object
await app.register(admission, { queueDelay: 5 })
// @ts-expect-error not an under-pressure signal
await app.register(admission, { pressure: { pressureHandler: (_q, _r, type: 'cpu') => type } })
const signal: 'eventLoopDelay' | 'heapUsedBytes' | 'rssBytes' | 'healthCheck' | 'eventLoopUtilization' | undefined = app.admission.pressure()?.reason?.signal
const shedByDelay: number | undefined = app.admission.stats().pressure?.shed.queueDelay
void signal; void shedByDelay
// The @fastify/rate-limit parity options.
await app.register(admission, {
  refusal: 'problem',
  errorResponseBuilder: (_request, context) => ({ statusCode: context.statusCode, reason: context.reason, wait: context.retryAfterSeconds }),
  allowList: { clients: ['10.0.0.0/8', 'ops'], skipsShedding: true },
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

// Charging after the response: the units the request really took, a number or a promise of one.
app.get('/complete', { config: { admission: { cost: 1_000, charge: (_request, reply) => reply.statusCode === 200 ? 4_000 : 0 } } }, async () => 'ok')
app.get('/export', { config: { admission: { charge: async () => 12 } } }, async () => 'ok')
// @ts-expect-error the charge returns units, not a string
app.get('/bad-charge', { config: { admission: { charge: () => 'many' } } }, async () => 'ok')
