// The cost benchmark's variants: one line each. A variant is a Fastify app (or, for the two floors
// of the load itself, a plain node:http or node:net server) with one route GET / answering a short
// string; `status` is what every measured response must be; `base` is what its Δ is measured against.
import { createServer as httpServer, type Server as HttpServer } from 'node:http'
import { createServer as netServer, type Server as NetServer } from 'node:net'
import type { Meter } from '@opentelemetry/api'
import Fastify, { type FastifyInstance, type FastifyRequest, type RouteShorthandOptions } from 'fastify'
// The package as built (`npm run bench:cost` builds it first), not lib/ through tsx.
import admission from '../../dist/index.js'
import { CLIENT_HEADER } from './load.js'
import { subscribe } from 'node:diagnostics_channel'

// The other packages a variant uses are imported by its setup, in its own process only: a module
// loaded for one variant changes what another measures. Loading the OpenTelemetry SDK as ESM made
// V8 promote ~2.6 MB per scavenge in admit-ip, a variant that never uses it (README, 2026-12-06).
const rateLimit = async () => (await import('@fastify/rate-limit')).default
const underPressure = async () => (await import('@fastify/under-pressure')).default
const newRegistry = async () => new (await import('prom-client')).Registry()

export interface CostVariant {
  readonly name: string
  readonly description: string
  /** The status of every measured response. */
  readonly status: 200 | 429 | 503
  /** The variant the Δ column subtracts (default `bare`). */
  readonly base?: string
  /** `fastify` (default); `http`: node:http alone; `net`: a canned reply on a node:net socket (the load's own floor). */
  readonly server?: 'fastify' | 'http' | 'http503' | 'net'
  /** Fastify's `logger: true`, writing into an in-process sink (pino's serialisation counted, no write). */
  readonly logger?: boolean
  /** Plugins and hooks, registered before the route. */
  readonly setup?: (app: FastifyInstance) => unknown
  /** The route's options. */
  readonly route?: RouteShorthandOptions
  /** In the default run (`BENCH_COST_VARIANTS` unset). Default true. */
  readonly byDefault?: boolean
  /** The route is declared before `setup` (the plugin's registration then finds it already there). */
  readonly routeFirst?: boolean
  /** The load comes from this many loopback addresses, one keep-alive connection each (`request.ip` clients). */
  readonly sources?: number
}

const HOUR = 3_600_000
/** Clients told apart by `request.ip`: the load's connections come from this many loopback addresses. */
const IP_SOURCES = 100
const BODY = 'hello world'

/**
 * The client id from the raw header list. `request.headers` would have Node build the whole
 * headers object, which bare Fastify never does: that cost would be the key function's, not the
 * limiter's. Both rate limiters get this one.
 */
export function byHeader (request: FastifyRequest): string {
  const raw = request.raw.rawHeaders
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.length === CLIENT_HEADER.length && raw[i]!.toLowerCase() === CLIENT_HEADER) return raw[i + 1]!
  }
  throw new Error(`no ${CLIENT_HEADER} header`)
}

type Done = (error?: Error) => void
const emptyHook = (_request: unknown, _reply: unknown, done: Done): void => { done() }
const huge = { limit: 1e9, windowMs: 60_000 }
// Limit 1 per client per hour: each of the load's clients is admitted once (all in the warm-up),
// then refused.
const once = { limit: 1, windowMs: HOUR }

// Addresses and keys the load's clients (127.0.0.1, ids `c<n>`) are not on.
const ALLOW_LIST = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10', '2001:db8::/32', 'fc00::/7', '198.51.100.7', '203.0.113.0/24',
  'ops-1', 'ops-2', 'ops-3', 'ops-4', 'monitor', 'backup', 'ci', 'health']

// Two stacked policies (issue 12 §4): a per-second and a per-day quota, decided as one.
const hugeStack = [huge, { limit: 1e6, windowMs: 86_400_000, name: 'daily' }]
const onceStack = [once, { limit: 1e6, windowMs: 86_400_000, name: 'daily' }]
const builder = (_request: FastifyRequest, context: { statusCode: number, after: string }): object => ({ statusCode: context.statusCode, error: 'Too Many Requests', message: `retry in ${context.after}` })
// Every parity feature that is per request on at once: a builder, an allow list (the client not on it), two stacked policies.
const featuresOn = (stack: object[]) => (app: FastifyInstance): unknown => app.register(admission, { maxInFlight: 10_000, rateLimit: stack as never, key: byHeader, allowList: ALLOW_LIST, errorResponseBuilder: builder })

const admit = (app: FastifyInstance): unknown => app.register(admission, { maxInFlight: 10_000, rateLimit: huge, key: byHeader })
const refuse = (app: FastifyInstance): unknown => app.register(admission, { maxInFlight: 10_000, rateLimit: once, key: byHeader })
// `cache` at least the load's clients (the default, 5000, holds them all).
const rlAdmit = async (app: FastifyInstance): Promise<unknown> => app.register(await rateLimit(), { max: 1e9, timeWindow: 60_000, keyGenerator: byHeader })
const rlRefuse = async (app: FastifyInstance): Promise<unknown> => app.register(await rateLimit(), { max: 1, timeWindow: HOUR, keyGenerator: byHeader })

// The floor of a refusal sent the Fastify way from a route's onRequest, with the plugin's body
// and headers as constants: what the plugin's refusal costs beyond its own code.
const REFUSAL_BODY = '{"statusCode":429,"error":"Too Many Requests","message":"Rate limit exceeded, retry in 3600 seconds"}'
function refusalFloor (rateLimitHeaders: boolean): RouteShorthandOptions {
  return {
    onRequest: (_request, reply, _done) => {
      if (rateLimitHeaders) reply.header('ratelimit-policy', '"default";q=1;w=3600').header('ratelimit', '"default";r=0;t=3600')
      reply.code(429).header('retry-after', '3600').header('content-type', 'application/json; charset=utf-8').send(REFUSAL_BODY)
    },
    onResponse: emptyHook
  }
}

// A server whose health check always fails: every gated request is shed by pressure (503).
const shedAll = { healthCheck: async () => false, healthCheckInterval: 60_000, retryAfter: 60 }
// The floor of a shed written from constant bytes on the raw response (hijacked), keeping
// Node's response queue (keep-alive, pipelined order): what a cheap refusal cannot go under.
const SHED_BODY = Buffer.from('{"statusCode":503,"error":"Service Unavailable","message":"Server is under pressure, retry in 60 seconds"}')
const SHED_HEAD = ['retry-after', '60', 'content-type', 'application/json; charset=utf-8', 'content-length', String(SHED_BODY.length)]
const shedFloor: RouteShorthandOptions = {
  onRequest: (_request, reply, _done) => {
    reply.hijack()
    reply.raw.writeHead(503, SHED_HEAD)
    reply.raw.end(SHED_BODY)
  },
  onResponse: emptyHook
}

// The load's ids as IPv4 addresses (`c37` → `10.0.0.37`), or as strings of the same length that
// are not (`k0.0.0.37`...): the two differ only in how the memory backend indexes the key.
const asAddress = new Map<string, string>()
const asOther = new Map<string, string>()
for (let i = 0; i < 65_536; i++) {
  asAddress.set(`c${i}`, `10.0.${i >> 8}.${i & 255}`)
  asOther.set(`c${i}`, `k0.${i >> 8}.${i & 255}.0`)
}
const byAddress = (request: FastifyRequest): string => asAddress.get(byHeader(request))!
const byOtherKey = (request: FastifyRequest): string => asOther.get(byHeader(request))!

/** A Meter of @opentelemetry/api with no SDK registered (a no-op Meter). */
const apiMeter = async (): Promise<Meter> => (await import('@opentelemetry/api')).metrics.getMeter('bench')
/** A Meter of an SDK MeterProvider whose reader nobody collects from during the run: the SDK's instruments are made, no export happens. */
async function sdkMeter (): Promise<Meter> {
  const { MeterProvider, MetricReader } = await import('@opentelemetry/sdk-metrics')
  class IdleReader extends MetricReader {
    protected override async onForceFlush (): Promise<void> {}
    protected override async onShutdown (): Promise<void> {}
  }
  return new MeterProvider({ readers: [new IdleReader()] }).getMeter('bench')
}

export const VARIANTS: readonly CostVariant[] = [
  { name: 'bare', description: 'bare Fastify 5', status: 200 },
  { name: 'onrequest', description: 'one empty onRequest hook', status: 200, setup: (app) => app.addHook('onRequest', emptyHook) },
  { name: 'hooks-route', description: 'empty onRequest + onResponse, route options', status: 200, route: { onRequest: emptyHook, onResponse: emptyHook } },
  { name: 'hooks-app', description: 'empty onRequest + onResponse, app.addHook', status: 200, setup: (app) => app.addHook('onRequest', emptyHook).addHook('onResponse', emptyHook) },
  { name: 'admit', description: 'fastify-admission admitting (maxInFlight + rateLimit, headers)', status: 200, setup: admit },
  { name: 'refuse', description: 'fastify-admission refusing (429)', status: 429, setup: refuse },
  { name: 'maxinflight', description: 'fastify-admission, maxInFlight only (rateLimit: false)', status: 200, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: false }) },
  { name: 'ratelimit', description: 'fastify-admission, rateLimit only (maxInFlight: false)', status: 200, setup: (app) => app.register(admission, { maxInFlight: false, rateLimit: huge, key: byHeader }) },
  { name: 'noheaders', description: 'fastify-admission admitting, headers: false', status: 200, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: huge, key: byHeader, headers: false }) },
  { name: 'optout', description: 'fastify-admission (as admit), route config { admission: false }', status: 200, setup: admit, route: { config: { admission: false } } },
  { name: 'rl-admit', description: '@fastify/rate-limit 11 admitting', status: 200, setup: rlAdmit },
  { name: 'rl-refuse', description: '@fastify/rate-limit 11 refusing (429)', status: 429, setup: rlRefuse },
  { name: 'under-pressure', description: '@fastify/under-pressure 9, defaults', status: 200, setup: async (app) => app.register(await underPressure()) },
  { name: 'hdr-floor', description: 'empty onRequest + onResponse (route options), onRequest sets two constant RateLimit headers', status: 200, route: { onRequest: (_request, reply, done) => { reply.header('ratelimit-policy', '"default";q=1000000000;w=60').header('ratelimit', '"default";r=999999999;t=1'); done() }, onResponse: emptyHook } },
  { name: 'admit-pk', description: 'as admit, headers: { partitionKey } (pk, an HMAC of the client key, on RateLimit)', status: 200, base: 'admit', byDefault: false, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: huge, key: byHeader, headers: { partitionKey: 'a secret of sixteen or more' } }) },
  { name: 'refuse-noheaders', description: 'fastify-admission refusing (429), headers: false', status: 429, byDefault: false, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: once, key: byHeader, headers: false }) },
  { name: 'refuse-floor', description: 'route onRequest sends a constant 429 (retry-after, content-type, the JSON body) + empty onResponse', status: 429, byDefault: false, route: refusalFloor(false) },
  { name: 'refuse-floor-hdr', description: 'refuse-floor plus two constant RateLimit headers', status: 429, byDefault: false, route: refusalFloor(true) },
  { name: 'admit-ipv4', description: 'as admit, keys that are IPv4 addresses (the memory backend\'s integer index)', status: 200, byDefault: false, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: huge, key: byAddress }) },
  { name: 'admit-strkey', description: 'as admit-ipv4, keys of the same length that are not addresses (its Map)', status: 200, byDefault: false, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: huge, key: byOtherKey }) },
  { name: 'admit-metrics', description: 'as admit, metrics on (a prom-client registry, never scraped)', status: 200, base: 'admit', byDefault: false, setup: async (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: huge, key: byHeader, metrics: { registry: await newRegistry() } }) },
  { name: 'refuse-metrics', description: 'as refuse, metrics on', status: 429, base: 'refuse', byDefault: false, setup: async (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: once, key: byHeader, metrics: { registry: await newRegistry() } }) },
  // OpenTelemetry metrics on admit's route (admit is the same route with them off).
  { name: 'otel-nosdk', description: 'as admit, metrics through a Meter of @opentelemetry/api with no SDK registered (a no-op Meter)', status: 200, base: 'admit', byDefault: false, setup: async (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: huge, key: byHeader, metrics: { meter: await apiMeter() } }) },
  { name: 'otel-sdk', description: 'as admit, metrics through an SDK MeterProvider whose reader is never collected during the run', status: 200, base: 'admit', byDefault: false, setup: async (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: huge, key: byHeader, metrics: { meter: await sdkMeter() } }) },
  { name: 'admit-nooffenders', description: 'as admit, offenders: false (the top-offenders sketch, on by default, off)', status: 200, base: 'admit', byDefault: false, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: huge, key: byHeader, offenders: false }) },
  { name: 'refuse-nooffenders', description: 'as refuse, offenders: false (no sketch to add the refused key to)', status: 429, base: 'refuse', byDefault: false, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: once, key: byHeader, offenders: false }) },
  { name: 'refuse-live', description: 'as refuse, the live page on (live: true)', status: 429, base: 'refuse', byDefault: false, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: once, key: byHeader, live: true }) },
  { name: 'admit-live', description: 'as admit, the live page on (live: true; never opened during the run)', status: 200, base: 'admit', byDefault: false, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: huge, key: byHeader, live: true }) },
  { name: 'admit-subscribed', description: 'as admit, one empty subscriber on fastify-admission:decision', status: 200, base: 'admit', byDefault: false, setup: (app) => { subscribe('fastify-admission:decision', () => {}); return admit(app) } },
  { name: 'bare-ip', description: 'bare Fastify 5, the load from 100 loopback addresses (one connection each)', status: 200, byDefault: false, sources: IP_SOURCES },
  { name: 'admit-ip', description: 'as admit, keyed by request.ip (no key option): 100 clients, one address each', status: 200, base: 'bare-ip', byDefault: false, sources: IP_SOURCES, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: huge }) },
  { name: 'admit-ip-live', description: 'as admit-ip, top offenders (the default) and the live page on (live: true)', status: 200, base: 'admit-ip', byDefault: false, sources: IP_SOURCES, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: huge, live: true }) },
  { name: 'admit-ip-nooffenders', description: 'as admit-ip, offenders: false', status: 200, base: 'admit-ip', byDefault: false, sources: IP_SOURCES, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: huge, offenders: false }) },
  // Fastify adds a second 'finish' listener to every response when a route has onResponse hooks: one
  // listener array per response, the allocation V8 may pretenure (README, 2026-12-06, the scavenger).
  { name: 'onresponse-ip', description: 'bare Fastify 5 + one empty onResponse hook (app.addHook), the load from 100 addresses', status: 200, base: 'bare-ip', byDefault: false, sources: IP_SOURCES, setup: (app) => app.addHook('onResponse', emptyHook) },
  { name: 'rl-admit-ip', description: '@fastify/rate-limit 11 admitting, keyed by request.ip (its default): 100 clients', status: 200, base: 'bare-ip', byDefault: false, sources: IP_SOURCES, setup: async (app) => app.register(await rateLimit(), { max: 1e9, timeWindow: 60_000 }) },
  { name: 'bare-log', description: 'bare Fastify 5, logger: true', status: 200, logger: true },
  { name: 'admit-log', description: 'fastify-admission admitting, logger: true', status: 200, logger: true, base: 'bare-log', setup: admit },
  { name: 'refuse-log', description: 'fastify-admission refusing (429), logger: true', status: 429, logger: true, base: 'bare-log', setup: refuse },
  { name: 'rl-admit-log', description: '@fastify/rate-limit 11 admitting, logger: true', status: 200, logger: true, base: 'bare-log', setup: rlAdmit },
  { name: 'rl-refuse-log', description: '@fastify/rate-limit 11 refusing (429), logger: true', status: 429, logger: true, base: 'bare-log', setup: rlRefuse },
  { name: 'hooks-app-log', description: 'empty onRequest + onResponse, app.addHook, logger: true', status: 200, logger: true, base: 'bare-log', setup: (app) => app.addHook('onRequest', emptyHook).addHook('onResponse', emptyHook) },
  // The parity options (not in the default run): each on, against the same base as admit/refuse.
  { name: 'admit-allowlist', description: 'fastify-admission admitting, an allowList of 8 CIDR ranges and 8 keys the client is not on', status: 200, byDefault: false, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: huge, key: byHeader, allowList: ALLOW_LIST }) },
  { name: 'admit-prehandler', description: "fastify-admission admitting, the rate check in preHandler (hook: 'preHandler')", status: 200, byDefault: false, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: huge, key: byHeader, hook: 'preHandler' }) },
  { name: 'refuse-builder', description: 'fastify-admission refusing (429) through errorResponseBuilder (a plain object, the default error handler)', status: 429, byDefault: false, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: once, key: byHeader, errorResponseBuilder: (_request, context) => ({ statusCode: context.statusCode, error: 'Too Many Requests', message: `retry in ${context.after}` }) }) },
  { name: 'refuse-problem', description: "fastify-admission refusing (429), refusal: 'problem'", status: 429, byDefault: false, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: once, key: byHeader, refusal: 'problem' }) },
  { name: 'shadow', description: 'fastify-admission over the quota with enforce: false (answered 200, counted)', status: 200, byDefault: false, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: once, key: byHeader, enforce: false }) },
  { name: 'admit-stacked', description: 'fastify-admission admitting, two stacked policies (per second and per day)', status: 200, byDefault: false, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: hugeStack as never, key: byHeader }) },
  { name: 'refuse-stacked', description: 'fastify-admission refusing (429), two stacked policies', status: 429, byDefault: false, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: onceStack as never, key: byHeader }) },
  { name: 'admit-features', description: 'fastify-admission admitting with an errorResponseBuilder, an allowList (client not on it) and two stacked policies', status: 200, byDefault: false, setup: featuresOn(hugeStack) },
  { name: 'refuse-features', description: 'fastify-admission refusing (429) with an errorResponseBuilder, an allowList and two stacked policies', status: 429, byDefault: false, setup: featuresOn(onceStack) },
  { name: 'admit-tiers', description: 'fastify-admission admitting, tiers (two, one policy each) picked by a header', status: 200, byDefault: false, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: { tiers: { free: huge, pro: { limit: 2e9, windowMs: 60_000 } }, tier: (request: FastifyRequest) => request.headers['x-plan'] === 'pro' ? 'pro' : 'free' } as never, key: byHeader }) },
  // Routes declared before the plugin (no registration saw them): the gate's hooks are the context's.
  { name: 'admit-early', description: 'as admit, the route declared before the plugin (context-level hooks)', status: 200, byDefault: false, routeFirst: true, setup: admit },
  { name: 'optout-early', description: 'as optout, the route declared before the plugin (context-level hooks)', status: 200, byDefault: false, routeFirst: true, setup: admit, route: { config: { admission: false } } },
  { name: 'shed', description: 'fastify-admission shedding (503: a failing health check)', status: 503, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: huge, key: byHeader, pressure: shedAll }) },
  { name: 'refuse-fast', description: "fastify-admission refusing (429) from precomputed bytes, refusal: { fast: 'all' }", status: 429, byDefault: false, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: once, key: byHeader, refusal: { fast: 'all' } }) },
  { name: 'refuse-fast-log', description: "as refuse-fast, logger: true", status: 429, logger: true, base: 'bare-log', byDefault: false, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: once, key: byHeader, refusal: { fast: 'all' } }) },
  { name: 'refuse-penalty', description: "fastify-admission refusing (429) with penalty: 'restart' (each refusal lengthens the block)", status: 429, byDefault: false, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: { ...once, penalty: 'restart' }, key: byHeader }) },
  { name: 'refuse-error', description: "fastify-admission refusing (429) through Fastify's error handling, refusal: 'error' (the default error handler)", status: 429, byDefault: false, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: once, key: byHeader, refusal: 'error' }) },
  // Under valgrind a request takes ~50 × as long: with the default 5 ms target the loop reads as a
  // standing queue and sheds; raised thresholds keep the same per-request work (a clock read, a
  // turn marker) without the verdict.
  { name: 'admit-auto', description: "fastify-admission admitting, maxInFlight: 'auto' (the adaptive limit and queueDelay, its thresholds raised for valgrind) + rateLimit", status: 200, byDefault: false, setup: (app) => app.register(admission, { maxInFlight: 'auto', queueDelay: { targetMs: 10_000, intervalMs: 60_000 }, rateLimit: huge, key: byHeader }) },
  { name: 'shed-log', description: 'fastify-admission shedding (503), logger: true', status: 503, logger: true, base: 'bare-log', byDefault: false, setup: (app) => app.register(admission, { maxInFlight: 10_000, rateLimit: huge, key: byHeader, pressure: shedAll }) },
  { name: 'shed-floor', description: 'route onRequest writes a constant 503 on the hijacked raw response + empty onResponse', status: 503, byDefault: false, route: shedFloor },
  { name: 'node-http-503', description: 'node:http alone writing a constant 503 (writeHead with the header list, end with a buffer)', status: 503, server: 'http503', byDefault: false },
  { name: 'node-http', description: 'node:http alone, no Fastify (load + HTTP server floor)', status: 200, server: 'http' },
  { name: 'load-only', description: 'canned reply on node:net, no HTTP server (the load and sockets alone)', status: 200, server: 'net' }
]

export function costVariant (name: string): CostVariant {
  const found = VARIANTS.find((v) => v.name === name)
  if (found === undefined) throw new Error(`unknown variant ${name}; known: ${VARIANTS.map((v) => v.name).join(', ')}`)
  return found
}

/** A started server of the variant, listening on a loopback port. */
export interface Started { port: number, close: () => Promise<void> }

const sink = { write (_line: string): void {} }

async function listenFastify (v: CostVariant): Promise<Started> {
  const app = Fastify({ logger: v.logger === true ? { level: 'info', stream: sink } : false })
  if (v.routeFirst === true) app.get('/', v.route ?? {}, () => BODY)
  if (v.setup !== undefined) await v.setup(app)
  if (v.routeFirst !== true) app.get('/', v.route ?? {}, () => BODY)
  await app.listen({ host: '127.0.0.1', port: 0 })
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('no TCP address')
  return { port: address.port, close: () => app.close() }
}

async function listenRaw (server: HttpServer | NetServer): Promise<Started> {
  await new Promise<void>((resolve) => { server.listen(0, '127.0.0.1', resolve) })
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no TCP address')
  return { port: address.port, close: () => new Promise((resolve) => { server.close(() => { resolve() }) }) }
}

export function start (v: CostVariant): Promise<Started> {
  switch (v.server ?? 'fastify') {
    case 'fastify':
      return listenFastify(v)
    case 'http':
      return listenRaw(httpServer({ keepAliveTimeout: 72_000 }, (_req, res) => {
        res.setHeader('content-type', 'text/plain; charset=utf-8')
        res.end(BODY)
      }))
    case 'http503':
      return listenRaw(httpServer({ keepAliveTimeout: 72_000 }, (_req, res) => {
        res.writeHead(503, SHED_HEAD)
        res.end(SHED_BODY)
      }))
    case 'net': {
      // Bare Fastify's reply, byte for byte but a fixed date; one request per chunk (no pipelining).
      const reply = Buffer.from(`HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${BODY.length}\r\nDate: Tue, 01 Dec 2026 10:00:00 GMT\r\nConnection: keep-alive\r\nKeep-Alive: timeout=72\r\n\r\n${BODY}`, 'latin1')
      return listenRaw(netServer({ noDelay: true }, (socket) => { socket.on('data', () => { socket.write(reply) }) }))
    }
  }
}
