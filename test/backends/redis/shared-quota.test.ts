// Shared quota at the HTTP gate: 4 processes, each its own Fastify app with its own ioredis
// client on the same Redis and prefix, one identity hammered through all of them at once. The
// total admitted equals the limit exactly, for every algorithm: Redis decides atomically, so no
// race between processes over-admits.
//
// This file is also the child: spawned with ADMISSION_SHARED_QUOTA_CHILD=1 (with the parent's
// `process.execArgv`, so tap's TypeScript loader and coverage apply to it), it serves instead of
// testing, and talks to the parent over IPC. tap is only loaded by the parent.
import type { AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import Fastify from 'fastify'
import { Redis } from 'ioredis'
import type { Policy } from '../../../lib/core/rates/index.js'
import { admission, redisBackend } from '../../../lib/index.js'
import { hammer, startChild, statsOf, windowAround, type Child, type ToChild, type ToParent } from './children.js'
import { deleteKeys, keysUnder, serverNow, sharedRedis, uniquePrefix } from './helpers.js'

const CHILD = 'ADMISSION_SHARED_QUOTA_CHILD'
const PROCESSES = 4
const REQUESTS = 400
const CONCURRENCY = 64
const LIMIT = 50
const IDENTITY = 'one-client'


if (process.env[CHILD] === '1') await serve()
else await tests()

/** The child: one Fastify app, a route per policy, its own client; answers the parent's messages. */
async function serve (): Promise<void> {
  const routes = JSON.parse(process.env.QUOTA_ROUTES as string) as Record<string, Policy>
  // The parent's shared server (its URL given by the parent).
  const redis = new Redis(process.env.REDIS_URL as string, { lazyConnect: true, connectTimeout: 1000, maxRetriesPerRequest: 1, retryStrategy: () => null })
  await redis.connect()
  const app = Fastify()
  // A generous timeout: this test is about atomicity, not latency (a timed-out call still runs
  // on Redis and would consume a unit without an admission to show for it).
  await app.register(admission, {
    backend: redisBackend({ client: redis, prefix: process.env.QUOTA_PREFIX as string, timeoutMs: 5000 }),
    rateLimit: false,
    key: () => IDENTITY
  })
  for (const [path, policy] of Object.entries(routes)) {
    app.get(path, { config: { admission: { rateLimit: policy } } }, async () => ({ pid: process.pid }))
  }
  await app.listen({ port: 0, host: '127.0.0.1' })
  const send = (message: ToParent): void => { process.send?.(message) }
  let closing = false
  // The parent gone without asking (it crashed or was killed): do not outlive it.
  process.on('disconnect', () => { if (!closing) process.exit(2) })
  process.on('message', (message: ToChild) => {
    if (message.type === 'stats') {
      send({ type: 'stats', stats: app.admission.stats() })
      return
    }
    // Close everything and let the event loop empty: a clean exit is exit code 0, by itself.
    closing = true
    void app.close().then(() => redis.quit()).then(() => { process.disconnect() })
  })
  send({ type: 'listening', port: (app.server.address() as AddressInfo).port })
}

async function tests (): Promise<void> {
  const { default: t } = await import('tap')
  const shared = await sharedRedis()
  const skip = 'skip' in shared ? shared.skip : false
  if ('redis' in shared) t.teardown(() => shared.redis.quit())

  t.test(`shared quota: ${PROCESSES} processes, one identity, ${REQUESTS} concurrent requests → exactly the limit admitted`, { skip, timeout: 60_000 }, async (t) => {
    const { redis, url } = shared as { redis: Redis, url: string }
    const prefix = uniquePrefix('quota')
    t.teardown(async () => { await deleteKeys(redis, prefix) })

    // Nothing refills during the test: a bucket gets a unit back every 72 s, and the windows
    // have more than two minutes to run.
    const windowMs = windowAround(await serverNow(redis), 120_000)
    const policies: Record<string, Policy> = {
      '/token-bucket': { algorithm: 'token-bucket', limit: LIMIT, windowMs: 3_600_000, burst: LIMIT },
      '/gcra': { algorithm: 'gcra', limit: LIMIT, windowMs: 3_600_000, burst: LIMIT },
      '/fixed-window': { algorithm: 'fixed-window', limit: LIMIT, windowMs },
      '/sliding-window-counter': { algorithm: 'sliding-window-counter', limit: LIMIT, windowMs }
    }

    const started = performance.now()
    const launched = Array.from({ length: PROCESSES }, () => startChild(fileURLToPath(import.meta.url), { [CHILD]: '1', QUOTA_PREFIX: prefix, QUOTA_ROUTES: JSON.stringify(policies), REDIS_URL: url }))
    const children: Child[] = []
    t.teardown(async () => {
      // Whatever happened, no child outlives the test: killed by its pid.
      for (const child of await Promise.allSettled(launched)) {
        if (child.status !== 'fulfilled') continue
        const { process: p } = child.value
        if (p.exitCode === null && p.signalCode === null) process.kill(p.pid as number, 'SIGKILL')
      }
    })
    for (const child of await Promise.allSettled(launched)) {
      if (child.status === 'fulfilled') children.push(child.value)
      else t.fail(`a child failed to start: ${(child.reason as Error).message}`)
    }
    if (children.length !== PROCESSES) return
    t.equal(new Set(children.map((c) => c.process.pid)).size, PROCESSES, `${PROCESSES} distinct processes listening (started in ${(performance.now() - started).toFixed(0)} ms)`)
    const ports = children.map((c) => c.port)

    for (const [path, policy] of Object.entries(policies)) {
      await t.test(`${policy.algorithm}: ${LIMIT} per ${policy.windowMs} ms`, async (t) => {
        const before = await serverNow(redis)
        const begun = performance.now()
        const results = await hammer(ports, path, REQUESTS, CONCURRENCY)
        const elapsed = performance.now() - begun
        const after = await serverNow(redis)
        if (policy.algorithm === 'fixed-window' || policy.algorithm === 'sliding-window-counter') {
          t.equal(Math.floor(after / windowMs), Math.floor(before / windowMs), 'precondition: the whole run fell in one window')
        }

        const failed = results.filter((r) => r.status === 0)
        t.same(failed.map((r) => r.error), [], 'every request got an answer')
        const statuses: Record<string, number> = {}
        for (const r of results) statuses[r.status] = (statuses[r.status] ?? 0) + 1
        t.same(statuses, { 200: LIMIT, 429: REQUESTS - LIMIT },
          `exactly ${LIMIT} admitted over ${PROCESSES} processes, the other ${REQUESTS - LIMIT} refused with 429 (${REQUESTS} requests in ${elapsed.toFixed(0)} ms)`)

        const admittedPerServer = ports.map((_, server) => results.filter((r) => r.server === server && r.status === 200).length)
        t.ok(admittedPerServer.filter((n) => n > 0).length >= 2, `admissions came from several processes: ${admittedPerServer.join(' + ')}`)
        const badRetry = results.filter((r) => r.status === 429 && !(Number(r.retryAfter) >= 1 && Number.isInteger(Number(r.retryAfter))))
        t.same(badRetry.map((r) => r.retryAfter), [], 'every 429 carries Retry-After ≥ 1 (whole seconds)')
      })
    }

    // Each process counted its own share; together they are the test's totals.
    const stats = await Promise.all(children.map(statsOf))
    for (const path of Object.keys(policies)) {
      const route = `GET ${path}`
      const sum = (field: 'admitted' | 'limited' | 'unavailable' | 'shed'): number =>
        stats.reduce((total, s) => total + (s.routes[route]?.[field] ?? 0), 0)
      t.same({ admitted: sum('admitted'), limited: sum('limited'), unavailable: sum('unavailable'), shed: sum('shed') },
        { admitted: LIMIT, limited: REQUESTS - LIMIT, unavailable: 0, shed: 0 }, `${route}: the processes' stats add up`)
    }

    // Children close their app and client and exit on their own, with code 0.
    for (const child of children) child.process.send({ type: 'close' } satisfies ToChild)
    let timer: NodeJS.Timeout | undefined
    const codes = await Promise.race([
      Promise.all(children.map((c) => c.exited)),
      new Promise<string>((resolve) => { timer = setTimeout(() => resolve('timeout after 10 s'), 10_000) })
    ])
    clearTimeout(timer)
    t.same(codes, children.map(() => 0), `every child exited cleanly (code 0) ${children.map((c) => c.output()).join('').trim()}`)

    const keys = await keysUnder(redis, prefix)
    t.equal(keys.length, Object.keys(policies).length, 'one key per route: the one identity, shared by all processes')
    t.ok(keys.every((key) => key.endsWith(`:${IDENTITY}}`)), 'keys end with the identity inside the hash tag')
    await deleteKeys(redis, prefix)
    t.same(await keysUnder(redis, prefix), [], 'all keys deleted')
  })
}
