// The child of test/gate/strict-process.test.ts: a server on the Redis backend (a scripted client: the
// decision comes by promise) whose application callbacks all fail, run by Node itself with
// --unhandled-rejections=strict and no handler of any kind for errors. No tests here.
import { subscribe } from 'node:diagnostics_channel'
import type { AddressInfo } from 'node:net'
import Fastify from 'fastify'
import admission, { DECISION_CHANNEL, redisBackend } from '../../lib/index.js'

let calls = 0
const reply = async (): Promise<unknown> => {
  const resetAt = Date.now() + 30_000
  // A fixed window: more comes when it ends (moreAt = resetAt), after the window's start and count.
  return calls++ === 0 ? [0, 1, 0, 0, resetAt, resetAt - 60_000, resetAt] : [0, 0, 0, 2001, resetAt, resetAt - 60_000, resetAt, resetAt - 60_000, 1]
}

subscribe(DECISION_CHANNEL, () => { throw new Error('a subscriber that throws') })
subscribe(DECISION_CHANNEL, async () => { throw new Error('a subscriber that rejects') })

const app = Fastify()
await app.register(admission, {
  backend: redisBackend({ client: { evalsha: reply, eval: reply }, denyCache: false }),
  rateLimit: { algorithm: 'fixed-window', limit: 1, windowMs: 60_000 },
  onLimit: () => { throw new Error('onLimit that throws') },
  errorResponseBuilder: () => Promise.reject(new Error('a builder that rejects')) as unknown as object
})
app.get('/', async () => 'ok')
await app.listen({ port: 0, host: '127.0.0.1' })
const handlers = process.listenerCount('unhandledRejection') + process.listenerCount('uncaughtException')
process.send!({ type: 'listening', port: (app.server.address() as AddressInfo).port, handlers })
process.on('message', () => { void app.close().then(() => { process.disconnect() }) })
