// The live page in a real browser: headless Chromium from the distribution's packages
// (/usr/bin/chromium, or CHROMIUM_PATH), driven by playwright-core, against a real server on a
// loopback port. The page loads with no console error and no failed request, draws the gate's
// numbers, and they change under traffic (limited and shed refusals of a small gate); a client's
// raw key never reaches the page; the refusals show under their reasons. Waits are for what the page shows, never for a fixed time.
// Without the browser the test is skipped, saying why: the rest of the page's behaviour is
// covered without it (live-page.test.ts, loopback.test.ts).
import t from 'tap'
import { existsSync } from 'node:fs'
import Fastify from 'fastify'
import admission from '../../lib/index.js'

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
// The flags a closed network and a container need: no sandbox, no GPU, nothing fetched at start.
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync']
const SECRET_KEY = 'api-key-4c1d-raw-secret'

t.test('the page in Chromium: no console error, its numbers change under traffic, no raw key', { skip: existsSync(CHROMIUM) ? false : `no Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)` }, async (t) => {
  const { chromium } = await import('playwright-core')
  const holds: Array<() => void> = []
  const app = Fastify()
  await app.register(admission, { maxInFlight: 2, rateLimit: { limit: 3, windowMs: 60_000 }, key: (request) => String(request.headers['x-client']), live: true })
  app.get('/', async () => 'ok')
  app.get('/hold', async () => { await new Promise<void>((resolve) => { holds.push(resolve) }); return 'held' })
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => app.close())
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS })
  t.teardown(() => browser.close())
  const page = await browser.newPage({ viewport: { width: 1000, height: 800 } })
  const problems: string[] = []
  page.on('console', (message) => { if (message.type() === 'error' || message.type() === 'warning') problems.push(`console ${message.type()}: ${message.text()}`) })
  page.on('pageerror', (error) => { problems.push(`page error: ${error.message}`) })
  page.on('requestfailed', (request) => { problems.push(`request failed: ${request.url()} ${request.failure()?.errorText ?? ''}`) })
  page.on('response', (response) => { if (response.status() >= 400) problems.push(`${response.status()} for ${response.url()}`) })

  const loaded = await page.goto(`${url}/admission/live`)
  t.equal(loaded?.status(), 200)
  await page.waitForSelector('#status.ok')
  const cells = (route: string): Promise<string[]> => page.$$eval(`tr[data-route="${route}"] td`, (tds) => tds.map((td) => td.textContent ?? ''))
  await page.waitForSelector('tr[data-route="GET /"]')
  t.same((await cells('GET /')).slice(5), ['0', '0', '0'], 'admitted, limited, shed: none yet')
  t.equal(await page.textContent('#limit'), '2')

  // Three admitted and two limited: the client's quota is 3 a minute.
  const statuses: number[] = []
  for (let i = 0; i < 5; i++) statuses.push((await fetch(`${url}/`, { headers: { 'x-client': SECRET_KEY } })).status)
  t.same(statuses, [200, 200, 200, 429, 429])
  // The gate full (two requests held), two more shed.
  const held = [fetch(`${url}/hold`, { headers: { 'x-client': 'h1' } }), fetch(`${url}/hold`, { headers: { 'x-client': 'h2' } })]
  while (holds.length < 2) await new Promise((resolve) => setTimeout(resolve, 10))
  for (let i = 0; i < 2; i++) t.equal((await fetch(`${url}/`, { headers: { 'x-client': `s${i}` } })).status, 503)

  await page.waitForFunction(() => {
    const tds = [...document.querySelectorAll('tr[data-route="GET /"] td')].map((td) => td.textContent)
    return tds[5] === '3' && tds[6] === '2' && tds[7] === '2'
  }, undefined, { polling: 50 })
  t.same((await cells('GET /')).slice(5), ['3', '2', '2'], 'the route\'s totals on the page')
  await page.waitForFunction(() => document.getElementById('in-flight')?.textContent === '2', undefined, { polling: 50 })
  t.pass('in flight: the two held requests')
  t.same((await cells('GET /hold')).slice(4, 6), ['2', '2'], '/hold: two in flight, two admitted')
  for (const release of holds) release()
  await Promise.all(held)
  await page.waitForFunction(() => document.getElementById('in-flight')?.textContent === '0', undefined, { polling: 50 })

  const points = await page.$eval('#lines polyline.in-flight', (line) => line.getAttribute('points') ?? '')
  t.ok(points.split(' ').length >= 1, 'the chart draws the in-flight line')
  const text = await page.evaluate(() => document.body.innerText)
  t.notOk(text.includes(SECRET_KEY), 'the client\'s raw key is not on the page')
  const offenders = await page.$$eval('#offenders tr', (rows) => rows.map((row) => [...row.querySelectorAll('td')].map((td) => td.textContent ?? '')))
  t.equal(offenders.length, 1, 'one client refused by its quota (a shed request counts for nobody)')
  t.match(offenders[0], [/^:[A-Za-z0-9+/]+=*:$/, '2'], 'listed by its key\'s digest, refused twice')
  const reason = (name: string): Promise<string | undefined> => page.$$eval(`tr[data-reason="${name}"] td`, (tds) => tds.at(-1)?.textContent ?? undefined)
  t.equal(await reason('quota:default'), '2', 'refusals by reason: two by the quota')
  t.equal(await reason('in-flight'), '2', 'two by the full in-flight gate')
  t.same(problems, [], 'no console error, no page error, no failed request')
})

t.test('a key that is HTML is shown as text, never made an element', { skip: existsSync(CHROMIUM) ? false : `no Chromium at ${CHROMIUM}` }, async (t) => {
  const { chromium } = await import('playwright-core')
  const app = Fastify()
  await app.register(admission, { rateLimit: { limit: 1, windowMs: 60_000 }, key: (request) => String(request.headers['x-client']), offenders: { rawKeys: true }, live: true })
  app.get('/', async () => 'ok')
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  t.teardown(() => app.close())
  const hostile = '<img src=x onerror="document.title=\'owned\'"><b>bold</b>'
  for (let i = 0; i < 2; i++) await fetch(`${url}/`, { headers: { 'x-client': hostile } })
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS })
  t.teardown(() => browser.close())
  const page = await browser.newPage()
  const problems: string[] = []
  page.on('console', (message) => { if (message.type() === 'error') problems.push(message.text()) })
  page.on('pageerror', (error) => { problems.push(error.message) })
  await page.goto(`${url}/admission/live`)
  await page.waitForSelector('#offenders tr[data-key] td')
  t.equal(await page.textContent('#offenders tr[data-key] td'), hostile, 'the key, character for character')
  t.equal(await page.$$eval('img, b', (elements) => elements.length), 0, 'no element made of it')
  t.not(await page.title(), 'owned')
  t.same(problems, [])
})
