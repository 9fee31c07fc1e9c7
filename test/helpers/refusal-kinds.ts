// One refusal of each kind, each made by its own registration's options and one scene of requests:
// what test/gate/reasons.test.ts reads through stats() and the decision events, and
// test/metrics/reasons.test.ts through prom-client and OpenTelemetry.
import type { FastifyInstance, RouteShorthandOptions } from 'fastify'
import { memoryBackend, type AdmissionOptions, type AdmissionRouteOptions, type RatesBackend } from '../../lib/index.js'
import { deferred, eventually, listen } from './http.js'
import { scriptedReadings } from './pressure.js'
import { rawSocket, statuses } from './raw.js'

export interface RefusalKind {
  /** The reason it is counted under (the kind's name). */
  readonly reason: string
  /** The gate that counts it, as `stats().routes` names it. */
  readonly route: string
  readonly status: 429 | 503
  /** A scene of its own for each app (a backend, readings or a clock of its own). */
  readonly scene: () => Scene
}

export interface Scene {
  /** The registration's options (a test adds its `metrics`). */
  readonly options: AdmissionOptions
  /** Declares the routes on the registered app, then makes one request refused for the reason: its status. */
  readonly refuse: (app: FastifyInstance) => Promise<number>
}

const NO_QUOTA = { rateLimit: false } as const

/** A route whose requests wait for `release` (each held request holds its permit). */
function holding (app: FastifyInstance, url: string, admission?: AdmissionRouteOptions): { release: () => void } {
  const gate = deferred()
  const options: RouteShorthandOptions = admission === undefined ? {} : { config: { admission } }
  app.get(url, options, async () => { await gate.promise; return 'done' })
  return { release: gate.resolve }
}

/** One request held on `url` (until `holds` says it is), then the refused one (`headers`): its status. */
async function heldThenRefused (app: FastifyInstance, url: string, release: () => void, holds: () => boolean, headers: Record<string, string> = {}): Promise<number> {
  // inject() starts a request once it is then-ed.
  const held = app.inject(url).then((response) => response)
  await eventually(holds)
  const refused = await app.inject({ url, headers })
  release()
  await held
  return refused.statusCode
}

/** Refusals of the request's quota until one is: its status (the scene's last request). */
async function untilRefused (request: () => Promise<number>): Promise<number> {
  let status = await request()
  for (let i = 0; i < 4 && status < 429; i++) status = await request()
  return status
}

/** The memory backend in a fleet of two members, this one ranked first: its share of a fleet limit of 2 is 1. */
export function fleetOfTwo (): RatesBackend {
  const memory = memoryBackend()
  return {
    kind: 'memory-in-a-fleet',
    limiter: (address, policy) => memory.limiter(address, policy),
    stop: () => memory.stop(),
    fleet: () => ({ refresh: async () => ({ members: 2, rank: 0, least: 2, most: 2 }), leave: async () => {} })
  }
}

/**
 * A request held on `/slow` (counted in flight) while the next one (with `headers`) is refused; on
 * `/stream` with `longLived`, counted among the long-lived connections.
 */
const inFlight = (reason: string, options: () => AdmissionOptions, admission?: AdmissionRouteOptions, headers: Record<string, string> = {}): RefusalKind => {
  const counted = admission?.longLived === true ? 'longLived' : 'inFlight'
  const url = counted === 'longLived' ? '/stream' : '/slow'
  const route = `GET ${url}`
  return {
    reason,
    route,
    status: 503,
    scene: () => ({
      options: options(),
      refuse: async (app) => {
        const { release } = holding(app, url, admission)
        return await heldThenRefused(app, url, release, () => app.admission.stats().routes[route]?.[counted] === 1, headers)
      }
    })
  }
}

const RETRY = { 'retry-attempt': '2' }

const quota = (reason: string, route: string, options: () => AdmissionOptions, admission?: AdmissionRouteOptions, headers: Record<string, string> = {}): RefusalKind => ({
  reason,
  route,
  status: 429,
  scene: () => ({
    options: options(),
    refuse: async (app) => {
      app.get('/q', admission === undefined ? {} : { config: { admission } }, async () => 'ok')
      return await untilRefused(async () => (await app.inject({ url: '/q', headers })).statusCode)
    }
  })
})

/** Pressure from readings of the scene's own: `over` puts a signal over its limit before the request. */
const pressure = (reason: string, over: { eventLoopDelay: number } | undefined, extra: object = {}): RefusalKind => ({
  reason,
  route: 'GET /',
  status: 503,
  scene: () => {
    const source = scriptedReadings()
    return {
      options: { ...NO_QUOTA, pressure: { maxEventLoopDelay: 50, sampleInterval: 10, readings: source.read, ...extra } },
      refuse: async (app) => {
        app.get('/', async () => 'ok')
        await app.ready()
        if (over !== undefined) await source.set(over)
        return (await app.inject('/')).statusCode
      }
    }
  }
})

/** Every kind of refusal the gate makes, one each. */
export const REFUSAL_KINDS: readonly RefusalKind[] = [
  inFlight('in-flight', () => ({ ...NO_QUOTA, maxInFlight: 1 })),
  inFlight('route-in-flight', () => NO_QUOTA, { maxInFlight: 1 }),
  inFlight('fleet-in-flight', () => ({ ...NO_QUOTA, backend: fleetOfTwo(), maxInFlight: { fleet: 2 } })),
  { ...inFlight('client-in-flight', () => ({ ...NO_QUOTA, clientInFlight: 1 })), status: 429 },
  inFlight('retry-reserve', () => ({ ...NO_QUOTA, maxInFlight: 2, retries: { reserve: 0.5 } }), undefined, RETRY),
  inFlight('route-retry-reserve', () => ({ ...NO_QUOTA, retries: { reserve: 0.5 } }), { maxInFlight: 2 }, RETRY),
  inFlight('long-lived', () => ({ ...NO_QUOTA, maxLongLived: 1 }), { longLived: true }),
  inFlight('route-long-lived', () => NO_QUOTA, { longLived: true, maxLongLived: 1 }),
  {
    reason: 'queue-delay',
    route: 'GET /',
    status: 503,
    // A clock that moves 30 s at each read: of five pipelined requests read in one turn, the fifth waited 120 s.
    scene: () => {
      let now = 0
      return {
        options: { ...NO_QUOTA, queueDelay: { targetMs: 5_000, intervalMs: 100_000, clock: () => (now += 30_000) } },
        refuse: async (app) => {
          app.get('/', async () => 'ok')
          const { socket, received } = await rawSocket(await listen(app))
          socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(5))
          await eventually(() => statuses(received()).length === 5)
          socket.destroy()
          return statuses(received())[4]!
        }
      }
    }
  },
  pressure('pressure:eventLoopDelay', { eventLoopDelay: 51 }),
  // Unhealthy until the check's first run says otherwise: it never does.
  pressure('pressure:healthCheck', undefined, { healthCheck: async () => false, healthCheckInterval: 60_000 }),
  quota('quota:default', 'GET /q', () => ({ rateLimit: { limit: 1, windowMs: 60_000 } })),
  quota('quota:per-minute', 'GET /q', () => ({ rateLimit: [{ name: 'per-hour', limit: 100, windowMs: 3_600_000 }, { name: 'per-minute', limit: 1, windowMs: 60_000 }] })),
  quota('quota:pro', 'GET /q (tier pro)', () => NO_QUOTA, { rateLimit: { tiers: { free: { limit: 5, windowMs: 60_000 }, pro: { limit: 1, windowMs: 60_000 } }, tier: (request) => String(request.headers['x-plan']) } }, { 'x-plan': 'pro' }),
  quota('penalty:default', 'GET /q', () => ({ rateLimit: { limit: 1, windowMs: 60_000, penalty: 'restart' } })),
  {
    reason: 'login-failures',
    route: 'POST /login',
    status: 429,
    scene: () => ({
      options: NO_QUOTA,
      refuse: async (app) => {
        app.post('/login', { config: { admission: { rateLimit: { limit: 1, windowMs: 60_000 }, count: 'failures' } } }, async (_request, reply) => reply.code(401).send({ error: 'wrong password' }))
        return await untilRefused(async () => (await app.inject({ method: 'POST', url: '/login' })).statusCode)
      }
    })
  },
  // Memory full of live state: a second client cannot be tracked.
  {
    reason: 'backend-unavailable',
    route: 'GET /q',
    status: 503,
    scene: () => ({
      options: { backend: memoryBackend({ maxIdentities: 1 }), rateLimit: { limit: 5, windowMs: 60_000 }, key: (request) => String(request.headers['x-client']) },
      refuse: async (app) => {
        app.get('/q', async () => 'ok')
        await app.inject({ url: '/q', headers: { 'x-client': 'one' } })
        return (await app.inject({ url: '/q', headers: { 'x-client': 'two' } })).statusCode
      }
    })
  }
]
