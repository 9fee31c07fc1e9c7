import t from 'tap'
import Fastify from 'fastify'
import { allowedOrigin, exposeToBrowsers } from '../../lib/gate/headers/rate-limit-fields.js'

// The origin is read from Fastify's own headers object when the reply has it, else through
// `getHeader` (a reply of another copy of Fastify, or anything shaped like one).
t.test('a reply without Fastify\'s headers object is asked through getHeader', async (t) => {
  const set: Record<string, string> = { 'access-control-allow-origin': 'https://app.example' }
  const reply = {
    raw: { getHeader: () => undefined },
    getHeader: (name: string) => set[name],
    header (name: string, value: string) { set[name] = value; return reply }
  }
  t.equal(allowedOrigin(reply as never), 'https://app.example')
  exposeToBrowsers(reply as never)
  t.equal(set['access-control-expose-headers'], 'Retry-After, RateLimit, RateLimit-Policy')
})

t.test("Fastify's reply: headers set on the reply, then on the raw response", async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  const seen: unknown[] = []
  app.get('/', async (_request, reply) => {
    seen.push(allowedOrigin(reply))
    reply.raw.setHeader('access-control-allow-origin', 'https://raw.example')
    seen.push(allowedOrigin(reply))
    reply.header('access-control-allow-origin', '*')
    seen.push(allowedOrigin(reply))
    return 'ok'
  })
  await app.inject('/')
  t.same(seen, [undefined, 'https://raw.example', '*'])
})
