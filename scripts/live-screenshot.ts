// The live page's picture in the docs (docs/images/live-page.png), taken in headless Chromium
// from a server under a made-up load: an adaptive in-flight limit, three routes, some forty
// clients within their quota and two scrapers far beyond theirs. Run it after a change to the page:
//
//   node --import tsx scripts/live-screenshot.ts                 # ~40 s of traffic, then the picture
//   LIVE_SECONDS=20 LIVE_OUT=/tmp/live.png node --import tsx scripts/live-screenshot.ts
//
// Needs Chromium (/usr/bin/chromium, or CHROMIUM_PATH). Only loopback traffic, bounded in time.
import { setTimeout as sleep } from 'node:timers/promises'
import Fastify from 'fastify'
import { chromium } from 'playwright-core'
import admission from '../lib/index.js'

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync']
const SECONDS = Number(process.env.LIVE_SECONDS ?? 40)
const OUT = process.env.LIVE_OUT ?? 'docs/images/live-page.png'

const app = Fastify()
await app.register(admission, {
  maxInFlight: { adaptive: true, min: 4, max: 60, initial: 24 },
  rateLimit: { limit: 900, windowMs: 60_000 },
  key: (request) => String(request.headers['x-api-key'] ?? request.ip),
  live: true
})
// Work that slows down as more of it runs at once, as a database does.
let running = 0
const work = async (base: number): Promise<string> => {
  running++
  try {
    await sleep(base + running * 2)
    return 'ok'
  } finally {
    running--
  }
}
app.get('/api/orders', async () => await work(5))
app.get('/api/search', async () => await work(20))
app.post('/api/checkout', async () => await work(10))
const url = await app.listen({ port: 0, host: '127.0.0.1' })

const scrapers = ['scraper-4f2a', 'scraper-9c01']
const paths = ['/api/orders', '/api/orders', '/api/search', '/api/checkout']
let stop = false
let active = 0
// A client loop: one request after another while it is among the active ones. Every sixth is a
// scraper's, with hardly a pause (two keys share them: their quota of 900 a minute runs out); the others
// each have a key of their own and pause between requests, well within it.
async function client (id: number): Promise<void> {
  const key = id % 6 === 5 ? scrapers[Math.floor(id / 6) % 2]! : `key-${id}`
  for (let n = 0; !stop; n++) {
    if (id >= active) {
      await sleep(100)
      continue
    }
    const path = paths[(id + n) % paths.length]!
    await fetch(`${url}${path}`, { method: path === '/api/checkout' ? 'POST' : 'GET', headers: { 'x-api-key': key } }).then((res) => res.arrayBuffer(), () => undefined)
    await sleep(key.startsWith('scraper') ? 2 : 40 + (n % 7) * 10)
  }
}

const browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS })
const page = await browser.newPage({ viewport: { width: 1000, height: 760 }, deviceScaleFactor: 1 })
await page.goto(`${url}/admission/live`)
const loops: Array<Promise<void>> = []
const started = Date.now()
// The load rises for 60 % of the time, then falls by half: the limit and the refusals move with it.
while (Date.now() - started < SECONDS * 1000) {
  const share = (Date.now() - started) / (SECONDS * 1000)
  active = Math.round(8 + 40 * (share < 0.6 ? share / 0.6 : 1 - (share - 0.6) * 1.25))
  while (loops.length < active) loops.push(client(loops.length))
  await sleep(500)
}
await page.screenshot({ path: OUT, fullPage: true })
stop = true
await Promise.all(loops)
await browser.close()
await app.close()
console.log(`wrote ${OUT}`)
