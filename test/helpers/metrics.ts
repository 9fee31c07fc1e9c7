import Fastify, { type FastifyInstance } from 'fastify'
import type { Test } from 'tap'
import { Registry } from 'prom-client'
import admission, { type AdmissionOptions, type RatesBackend } from '../../lib/index.js'
import type { AdmissionMetricsOptions } from '../../lib/metrics/options.js'
import type { Teardown } from './http.js'
import type { BackendLimiter } from '../../lib/rates/backend.js'

export interface Sample { labels: Record<string, string | number>, value: number, metricName?: string }
export interface Family { name: string, type: string, help: string, values: Sample[] }

/** The registry's metrics as prom-client reports them at a scrape. */
export async function scrape (registry: Registry): Promise<Map<string, Family>> {
  const families = await registry.getMetricsAsJSON() as unknown as Family[]
  return new Map(families.map((family) => [family.name, family]))
}

/** The value of the one sample of `name` whose labels include `labels`; undefined when there is none. */
export function valueOf (families: Map<string, Family>, name: string, labels: Record<string, string> = {}): number | undefined {
  const family = families.get(name.replace(/_(bucket|count|sum)$/, ''))
  const wanted = Object.entries(labels)
  const found = family?.values.filter((sample) => (sample.metricName ?? family.name) === name && wanted.every(([k, v]) => sample.labels[k] === v))
  if (found === undefined || found.length === 0) return undefined
  if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`)
  return found[0]!.value
}

/** A backend deciding by promise (as Redis does), each consume() answered by `answer()`. */
export function scriptedBackend (answer: () => unknown): RatesBackend & { calls: number } {
  const backend = {
    kind: 'scripted',
    calls: 0,
    limiter: (_address: string, policy: BackendLimiter['policy']): BackendLimiter => ({
      policy,
      consume: (() => { backend.calls++; return answer() }) as BackendLimiter['consume'],
      state: async () => undefined,
      delete: async () => false
    }),
    stop: async () => {}
  }
  return backend
}

/** A decision a backend would give: allowed, or denied with a wait. */
export function decision (allowed: boolean, retryAfterMs = 0): unknown {
  return allowed
    ? { allowed: true, denied: false, remaining: 1, resetAt: Date.now() }
    : { allowed: false, denied: true, remaining: 0, resetAt: Date.now() + retryAfterMs, retryAfterMs }
}

/**
 * The sequence both reporters' tests read after, on a registration with `maxInFlight: 3` and a
 * shared quota of 2: `GET /a` admitted twice then limited, an opted-out `GET /off`, a 404 limited
 * by the shared quota, and `GET /slow` (its own `maxInFlight: 1`) holding one request while the
 * next is shed. Returns the held request and what lets it finish.
 */
export async function heldSequence (t: Test, app: FastifyInstance): Promise<{ pending: Promise<{ statusCode: number }>, release: () => void }> {
  const slow = held()
  app.get('/a', async () => 'ok')
  app.get('/slow', { config: { admission: { maxInFlight: 1, rateLimit: false } } }, async () => { await slow.gate; return 'done' })
  app.get('/off', { config: { admission: false } }, async () => 'free')
  app.setNotFoundHandler({ preHandler: app.admission.notFound }, async (_request, reply) => reply.code(404).send('none'))
  t.same([(await app.inject('/a')).statusCode, (await app.inject('/a')).statusCode, (await app.inject('/a')).statusCode], [200, 200, 429])
  t.equal((await app.inject('/off')).statusCode, 200)
  t.equal((await app.inject('/nowhere')).statusCode, 429, 'the 404 takes from the shared quota, which /a emptied')
  const pending = app.inject('/slow')
  await permitsTaken()
  t.equal((await app.inject('/slow')).statusCode, 503)
  return { pending, release: slow.release }
}

/** A promise the test settles: a handler awaiting `gate` holds its permit until `release()`. */
export function held (): { gate: Promise<void>, release: () => void } {
  let release: () => void = () => {}
  const gate = new Promise<void>((resolve) => { release = resolve })
  return { gate, release }
}

/** Requests injected just before have their permits once their onRequest ran: a turn of the event loop. */
export function permitsTaken (): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve))
}

/**
 * A backend deciding by round trip, on later turns of the event loop: allowed, denied, two
 * failures, then a synchronous throw (which starts no round trip).
 */
export function flakyBackend (): RatesBackend & { calls: number } {
  const script = [decision(true), decision(false, 2000), 'fail', 'fail', 'throw']
  return scriptedBackend(() => {
    const next = script.shift()
    if (next === 'throw') throw new Error('a synchronous throw')
    return next === 'fail' ? new Promise((_resolve, reject) => setImmediate(() => { reject(new Error('down')) })) : new Promise((resolve) => setImmediate(() => { resolve(next) }))
  })
}

/** The five requests of `flakyBackend`'s script on one route: their statuses. */
export async function flakyStatuses (app: FastifyInstance): Promise<number[]> {
  app.get('/r', async () => 'ok')
  const statuses = []
  for (let i = 0; i < 5; i++) statuses.push((await app.inject('/r')).statusCode)
  return statuses
}

/**
 * A child registration at `/child` (its own quota of 1, reporting with `metrics`) under the
 * app's: `GET /child/inner` twice (the second limited by the child), `GET /outer` once.
 */
export async function childSequence (app: FastifyInstance, metrics: AdmissionMetricsOptions): Promise<void> {
  await app.register(async (child) => {
    await child.register(admission, { rateLimit: { limit: 1, windowMs: 60_000 }, metrics })
    child.get('/inner', async () => 'inner')
  }, { prefix: '/child' })
  app.get('/outer', async () => 'outer')
  await app.inject('/child/inner')
  await app.inject('/child/inner')
  await app.inject('/outer')
}

/** An app with the plugin reporting to `metrics` (`options` may override it), closed at the test's end. */
export async function metricsApp (t: Teardown, metrics: AdmissionMetricsOptions, options: AdmissionOptions = {}): Promise<FastifyInstance> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { metrics, ...options })
  return app
}

/** Three requests held in flight, on two routes (`GET /a`, `GET /b` twice); `release` lets them finish. */
export async function threeHeld (app: FastifyInstance): Promise<{ release: () => Promise<void> }> {
  const slow = held()
  app.get('/a', async () => { await slow.gate; return 'a' })
  app.get('/b', async () => { await slow.gate; return 'b' })
  const pending = [app.inject('/a'), app.inject('/b'), app.inject('/b')]
  await permitsTaken()
  return { release: async () => { slow.release(); await Promise.all(pending) } }
}

/**
 * Two apps at their root reporting to one registry or Meter (`where`): the second is refused
 * (`metrics.registration`: both are `app`), a third named `admin` joins. `GET /a` of the first
 * and `GET /b` of `admin` are asked once each.
 */
export async function twoRoots (t: Test, metrics: AdmissionMetricsOptions, where: string): Promise<{ first: FastifyInstance, admin: FastifyInstance }> {
  const first = await metricsApp(t, metrics)
  first.get('/a', async () => 'a')
  const second = Fastify()
  t.teardown(() => second.close())
  const error = await second.register(admission, { metrics }).then(() => undefined, (e: unknown) => e)
  t.match(error, { name: 'AdmissionOptionError', code: 'ADMISSION_INVALID_OPTION', path: 'metrics.registration', value: 'app' })
  t.match((error as Error).message, new RegExp(`Expected \`metrics.registration\` to be a label no other registration reporting to this ${where} has .* got 'app' \\(string\\)`))
  const admin = await metricsApp(t, { ...metrics, registration: 'admin' })
  admin.get('/b', async () => 'b')
  await first.inject('/a')
  await admin.inject('/b')
  return { first, admin }
}
