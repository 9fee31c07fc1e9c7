import t from 'tap'
import Fastify from 'fastify'
import { allowedOrigin, exposeToBrowsers, setFields } from '../../lib/gate/headers/rate-limit-fields.js'

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
  setFields(reply as never, '"default";q=10;w=60', undefined)
  t.equal(set['ratelimit-policy'], '"default";q=10;w=60', 'the fields set through header()')
  t.equal(set.ratelimit, undefined, 'RateLimit only when known')
  setFields(reply as never, '"default";q=10;w=60', '"default";r=9;t=6')
  t.equal(set.ratelimit, '"default";r=9;t=6')
})

t.test("the fields set in Fastify's headers object are what reply.header() would have set", async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  const seen: unknown[] = []
  app.get('/', async (_request, reply) => {
    setFields(reply, '"default";q=10;w=60', '"default";r=9;t=6')
    seen.push(reply.getHeader('RateLimit-Policy'), reply.getHeader('RateLimit'), reply.hasHeader('ratelimit'))
    return 'ok'
  })
  const res = await app.inject('/')
  t.same(seen, ['"default";q=10;w=60', '"default";r=9;t=6', true])
  t.equal(res.headers['ratelimit-policy'], '"default";q=10;w=60')
  t.equal(res.headers.ratelimit, '"default";r=9;t=6')
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
