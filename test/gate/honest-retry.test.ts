import t from 'tap'
import Fastify from 'fastify'
import fc from 'fast-check'
import { performance } from 'node:perf_hooks'
import admission from '../../lib/index.js'
import { get, listen, sleep } from '../helpers/http.js'

// A client that waits exactly the Retry-After it was given, then retries with the same cost, is
// admitted when nothing else used its bucket — over a real socket, on the server's real clock.

interface Case { limit: number, windowMs: number, burst: number, cost: number }

// Configurations whose tokens come slowly enough (>= 100 ms each) that a quick burst of requests
// reaches a refusal, and whose refusal asks for at most a few seconds, so the test stays short.
const arbitraryCase = fc.record({
  limit: fc.integer({ min: 1, max: 25 }),
  windowMs: fc.integer({ min: 100, max: 2_500 }),
  burst: fc.integer({ min: 1, max: 6 }),
  cost: fc.integer({ min: 1, max: 6 })
}).filter((c) => c.cost <= c.burst && c.windowMs / c.limit >= 100 && (c.cost * c.windowMs) / c.limit <= 2_500)

const edges: Case[] = [
  { limit: 1, windowMs: 1_000, burst: 1, cost: 1 }, // exactly one second
  { limit: 1, windowMs: 999, burst: 1, cost: 1 },
  { limit: 1, windowMs: 1_001, burst: 1, cost: 1 }, // just over: must say 2
  { limit: 3, windowMs: 1_000, burst: 3, cost: 2 }, // a fraction of a token left over
  { limit: 7, windowMs: 2_000, burst: 2, cost: 2 }
]

const sampled = fc.sample(arbitraryCase, { numRuns: 15, seed: 20261130 })

t.test('waiting exactly Retry-After is always enough', async (t) => {
  const cases = [...edges, ...sampled]
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: false })
  cases.forEach((c, i) => {
    app.get(`/case/${i}`, { config: { admission: { rateLimit: { limit: c.limit, windowMs: c.windowMs, burst: c.burst }, cost: c.cost } } }, async () => 'ok')
  })
  const port = await listen(app)
  await Promise.all(cases.map(async (c, i) => {
    const path = `/case/${i}`
    let refused
    let refusedAt = 0
    for (let n = 0; n < 50; n++) {
      refused = await get(port, path)
      refusedAt = performance.now()
      if (refused.status === 429) break
    }
    t.equal(refused!.status, 429, `case ${JSON.stringify(c)} is refused after a quick burst`)
    const seconds = Number(refused!.headers['retry-after'])
    t.ok(Number.isInteger(seconds) && seconds >= 1, `Retry-After ${seconds}`)
    // Timers may fire a little early against the real clock; the client waits the real time.
    await sleep(seconds * 1000)
    while (performance.now() - refusedAt < seconds * 1000) await sleep(1)
    const retried = await get(port, path)
    t.equal(retried.status, 200, `case ${JSON.stringify(c)} admitted after exactly ${seconds} s`)
  }))
})
