// Route groups (`config.admission.groupId`, as @fastify/rate-limit's): routes naming the same
// group take from one quota, apart from the plugin's shared quota and from routes' own.
import t from 'tap'
import Fastify from 'fastify'
import admission, { AdmissionOptionError, memoryBackend } from '../../lib/index.js'

const clock = (): number => 1_700_000_000_000
const TWO = { algorithm: 'fixed-window', limit: 2, windowMs: 60_000 } as const

t.test('routes of one group share its quota; other routes and groups do not', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { backend: memoryBackend({ clock }), rateLimit: { algorithm: 'fixed-window', limit: 3, windowMs: 60_000 } })
  const h = async (): Promise<string> => 'ok'
  app.get('/search', { config: { admission: { groupId: 'search', rateLimit: TWO } } }, h)
  app.get('/suggest', { config: { admission: { groupId: 'search', rateLimit: TWO, cost: 1 } } }, h)
  app.get('/export', { config: { admission: { groupId: 'bulk' } } }, h)
  app.get('/report', { config: { admission: { groupId: 'bulk' } } }, h)
  app.get('/plain', h)
  const status = async (url: string): Promise<number> => (await app.inject(url)).statusCode
  t.equal(await status('/search'), 200)
  const second = await app.inject('/suggest')
  t.equal(second.statusCode, 200)
  t.equal(second.headers['ratelimit-policy'], '"default";q=2;w=60', "the group's policy")
  t.equal(second.headers.ratelimit, '"default";r=0;t=40', 'the second unit of the group')
  t.equal(await status('/search'), 429)
  t.equal(await status('/suggest'), 429)
  // The group `bulk` takes the plugin's policy, on a quota of its own.
  for (let i = 0; i < 3; i++) t.equal(await status(i % 2 === 0 ? '/export' : '/report'), 200)
  t.equal(await status('/report'), 429)
  for (let i = 0; i < 3; i++) t.equal(await status('/plain'), 200, "the plugin's shared quota is untouched")
  t.equal(await status('/plain'), 429)
  t.match(app.admission.stats().routes, {
    'GET /search': { admitted: 1, limited: 1 },
    'GET /suggest': { admitted: 1, limited: 1 },
    'GET /export': { admitted: 2 },
    'GET /report': { admitted: 1, limited: 1 }
  })
  // A group route's registry is the group's.
  t.ok(await app.admission.registryOf('GET /suggest')!.get('127.0.0.1'))
  t.equal(await app.admission.registryOf('GET /search')!.delete('127.0.0.1'), true)
  t.equal(await app.admission.registryOf('GET /suggest')!.delete('127.0.0.1'), false, 'one state for the group')
  t.equal(await status('/suggest'), 200)
})

t.test('a group has one policy: another one on a later route fails at ready, naming both', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: TWO })
  app.get('/a', { config: { admission: { groupId: 'g' } } }, async () => 'ok')
  app.get('/b', { config: { admission: { groupId: 'g', rateLimit: { limit: 5, windowMs: 1000 } } } }, async () => 'ok')
  // (a route's policy without an algorithm takes the plugin's, fixed-window)
  const error = await app.ready().then(() => undefined, (e: unknown) => e)
  t.type(error, AdmissionOptionError)
  t.match(error, {
    code: 'ADMISSION_INVALID_OPTION',
    path: 'config.admission of GET /b.groupId',
    value: 'g',
    message: 'Expected `config.admission of GET /b.groupId` to be a route of group "g" with its policy, 2 per 60000 ms (fixed-window) (set by GET /a); give every route of a group the same rateLimit, got "g" with 5 per 1000 ms (fixed-window)'
  })
})

t.test('groupId is checked: a non-empty well-formed string of at most 128, where there is a quota', async (t) => {
  for (const [admissionConfig, expected] of [
    [{ groupId: 1 }, /a non-empty string of at most 128 characters, got 1 \(number\)/],
    [{ groupId: '' }, /a non-empty string/],
    [{ groupId: 'x'.repeat(129) }, /at most 128 characters/],
    [{ groupId: 'a\uD800' }, /a non-empty string/],
    [{ groupId: 'g', rateLimit: false }, /absent where there is no rate limit \(a group shares a quota\)/]
  ] as Array<[Record<string, unknown>, RegExp]>) {
    const app = Fastify()
    await app.register(admission)
    app.get('/x', { config: { admission: admissionConfig as never } }, async () => 'ok')
    const error = await app.ready().then(() => undefined, (e: unknown) => e)
    t.match(error, { code: 'ADMISSION_INVALID_OPTION', path: 'config.admission of GET /x.groupId', message: expected })
    await app.close()
  }
})
