import Fastify from 'fastify'
import admission from '../lib/index.js'

// The example runs on the embedded default (memory). `npm start`, then try the curl lines it prints.
const app = Fastify({ logger: { level: 'warn' } })

await app.register(admission, {
  maxInFlight: 512,
  rateLimit: { limit: 100, windowMs: 60_000, burst: 20 }
})

app.get('/', async () => ({ hello: 'world' }))
// Three per ten seconds, so a fourth quick call gets a 429 with its Retry-After.
app.get('/limited', { config: { admission: { rateLimit: { limit: 3, windowMs: 10_000 } } } }, async () => ({ ok: true }))
// One at a time and slow, so a second concurrent call is shed with a 503.
app.get('/slow', { config: { admission: { maxInFlight: 1 } } }, async () => {
  await new Promise((resolve) => setTimeout(resolve, 3_000))
  return { done: true }
})
app.get('/health', { config: { admission: false } }, async () => ({ up: true }))
app.get('/stats', { config: { admission: false } }, async () => app.admission.stats())

// PORT (default 3000) chooses the port; one taken, or not a port, is said in one line, no stack.
const port = Number(process.env.PORT ?? 3000)
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`fastify-admission example: PORT must be a port number from 0 to 65535, got ${JSON.stringify(process.env.PORT)}`)
  process.exit(1)
}
const address = await app.listen({ port, host: '127.0.0.1' }).catch((error: NodeJS.ErrnoException) => {
  if (error.code !== 'EADDRINUSE') throw error
  console.error(`fastify-admission example: port ${port} on 127.0.0.1 is taken; choose another with PORT, as in PORT=3001 npm start`)
  process.exit(1)
})
const base = address.replace('http://', '')
console.log(`fastify-admission example listening on ${address} (memory backend)

  a 429:  for i in 1 2 3 4; do curl -s -o /dev/null -w '%{http_code}\\n' ${base}/limited; done; curl -si ${base}/limited | head -n 8
  a 503:  curl -s ${base}/slow & sleep 0.2; curl -si ${base}/slow; wait
  stats:  curl -s ${base}/stats

Ctrl-C stops it.`)

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => { void app.close().then(() => process.exit(0)) })
}
