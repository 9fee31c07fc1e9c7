// The companion client beside undici's own retry interceptor, on real sockets, in one run:
//   1. against this plugin shedding at 2 × capacity (maxInFlight 8, a 20 ms handler: C = 400/s,
//      offered 800/s open loop for 5 s): retries as a share of first attempts, and what was served;
//   2. against a plain server that refuses 1 request in 20 once (429, Retry-After: 1): the share
//      of the application's requests that end served;
//   3. in both, attempts that arrived before the time their refusal advertised (refusal written +
//      Retry-After), counted from the server's own records.
// Usage: npm run build && node --import tsx bench/client/run.ts
import Fastify from 'fastify'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Agent, interceptors, request, type Dispatcher } from 'undici'
import admission from '../../dist/index.js'
import { admissionRetry } from '../../dist/client/index.js'

interface Record_ { id: string, arrived: number, answered: number, status: number, retryAfterMs: number }

const SECONDS = 5
const SLOTS = 8
const HANDLER_MS = 20
const CAPACITY = SLOTS * 1000 / HANDLER_MS

function clients (): Array<[string, () => { dispatcher: Dispatcher, stats?: () => object }]> {
  return [
    ['admissionRetry()', () => { const r = admissionRetry(); return { dispatcher: new Agent({ connections: 256 }).compose(r), stats: r.stats } }],
    ['undici interceptors.retry()', () => ({ dispatcher: new Agent({ connections: 256 }).compose(interceptors.retry()) })],
    ['no retry', () => ({ dispatcher: new Agent({ connections: 256 }) })]
  ]
}

/** Attempts by request id: the first, the retries, and retries that came before their refusal's advertised time. */
function summarize (records: Record_[], ids: number): { first: number, retries: number, early: number, servedShare: number } {
  const byId = new Map<string, Record_[]>()
  for (const r of records) byId.set(r.id, [...(byId.get(r.id) ?? []), r])
  let retries = 0
  let early = 0
  let served = 0
  for (const list of byId.values()) {
    list.sort((a, b) => a.arrived - b.arrived)
    retries += list.length - 1
    for (let i = 1; i < list.length; i++) if (list[i]!.arrived < list[i - 1]!.answered + list[i - 1]!.retryAfterMs) early++
    if (list.some((r) => r.status === 200)) served++
  }
  return { first: byId.size, retries, early, servedShare: served / ids }
}

async function open (dispatcher: Dispatcher, origin: string, rate: number, seconds: number, prefix: string): Promise<number> {
  const total = rate * seconds
  const start = Date.now()
  const pending: Array<Promise<void>> = []
  for (let i = 0; i < total; i++) {
    const due = start + Math.floor(i * 1000 / rate)
    const wait = due - Date.now()
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
    pending.push(request(`${origin}/`, { dispatcher, headers: { 'x-id': `${prefix}${i}` } }).then((r) => r.body.dump(), () => undefined))
  }
  await Promise.all(pending)
  return total
}

async function shedding (): Promise<void> {
  console.log(`\n## Against fastify-admission shedding at 2 × C (C = ${CAPACITY}/s, offered ${2 * CAPACITY}/s for ${SECONDS} s)\n`)
  console.log('| client | first attempts | retries | retries / first | served / requests | early | client stats |')
  console.log('|---|---|---|---|---|---|---|')
  for (const [name, make] of clients()) {
    const records: Record_[] = []
    const app = Fastify()
    app.addHook('onRequest', async (req) => { records.push({ id: req.headers['x-id'] as string, arrived: Date.now(), answered: 0, status: 0, retryAfterMs: 0 }) })
    app.addHook('onSend', async (req, reply) => {
      let r = records[records.length - 1]!
      for (let i = records.length - 1; i >= 0; i--) if (records[i]!.id === req.headers['x-id']) { r = records[i]!; break }
      r.answered = Date.now()
      r.status = reply.statusCode
      const ra = reply.getHeader('retry-after')
      r.retryAfterMs = ra === undefined ? 0 : Number(ra) * 1000
    })
    await app.register(admission, { maxInFlight: SLOTS, refusal: { fast: false } })
    app.get('/', async () => { await new Promise((resolve) => setTimeout(resolve, HANDLER_MS)); return 'ok' })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const origin = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
    const { dispatcher, stats } = make()
    const ids = await open(dispatcher, origin, 2 * CAPACITY, SECONDS, 's')
    const s = summarize(records, ids)
    console.log(`| ${name} | ${s.first} | ${s.retries} | ${(100 * s.retries / s.first).toFixed(1)} % | ${(100 * s.servedShare).toFixed(1)} % | ${s.early} | ${stats === undefined ? '' : JSON.stringify(stats())} |`)
    await dispatcher.close()
    await app.close()
  }
}

async function refusingOnce (): Promise<void> {
  const REQUESTS = 2000
  console.log(`\n## Against a plain server refusing 1 request in 20 once (429, Retry-After: 1; ${REQUESTS} requests at 400/s)\n`)
  console.log('| client | retries | retries / first | served / requests | early |')
  console.log('|---|---|---|---|---|')
  for (const [name, make] of clients()) {
    const records: Record_[] = []
    const seen = new Set<string>()
    let firsts = 0
    const server = createServer((req, res) => {
      const id = req.headers['x-id'] as string
      const r: Record_ = { id, arrived: Date.now(), answered: 0, status: 200, retryAfterMs: 0 }
      records.push(r)
      const refuse = !seen.has(id) && firsts++ % 20 === 19
      seen.add(id)
      req.resume()
      req.on('end', () => {
        r.answered = Date.now()
        if (refuse) {
          r.status = 429
          r.retryAfterMs = 1000
          res.writeHead(429, { 'retry-after': '1' }).end('refused')
        } else res.end('ok')
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    const { dispatcher } = make()
    const ids = await open(dispatcher, origin, 400, REQUESTS / 400, 'r')
    const s = summarize(records, ids)
    console.log(`| ${name} | ${s.retries} | ${(100 * s.retries / s.first).toFixed(1)} % | ${(100 * s.servedShare).toFixed(1)} % | ${s.early} |`)
    await dispatcher.close()
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  }
}

await shedding()
await refusingOnce()
