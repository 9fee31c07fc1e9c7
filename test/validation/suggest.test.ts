import t from 'tap'
import Fastify from 'fastify'
import admission, { AdmissionOptionError } from '../../lib/index.js'
import type { AdmissionOptions } from '../../lib/index.js'
import { PLUGIN_HINTS, ROUTE_HINTS } from '../../lib/gate/options/peer-options.js'
import { editDistance, nearest } from '../../lib/validation/suggest.js'

t.test('editDistance: insertions, deletions, substitutions and swaps of neighbours', async (t) => {
  t.equal(editDistance('', ''), 0)
  t.equal(editDistance('abc', ''), 3)
  t.equal(editDistance('', 'ab'), 2)
  t.equal(editDistance('kitten', 'sitting'), 3)
  t.equal(editDistance('limt', 'limit'), 1)
  t.equal(editDistance('hoko', 'hook'), 1, 'a swap is one edit')
  t.equal(editDistance('abcdef', 'abcdef'), 0)
  t.equal(editDistance('a', 'abcdef', 2), 3, 'past `most`, at once: most + 1')
  t.equal(editDistance('zzzzzz', 'abcdef', 2), 3, 'a row all past `most` stops there')
})

t.test('nearest: case not counted, one edit (two from six letters), the first of the nearest', async (t) => {
  const known = ['maxInFlight', 'rateLimit', 'cost', 'hook', 'key']
  t.equal(nearest('maxInflight', known), 'maxInFlight')
  t.equal(nearest('ratelimit', known), 'rateLimit')
  t.equal(nearest('maxInFlihgt', known), 'maxInFlight')
  t.equal(nearest('rateLmt', known), 'rateLimit', 'two edits in a long name')
  t.equal(nearest('cots', known), 'cost')
  t.equal(nearest('kye', known), 'key')
  t.equal(nearest('cxxt', known), undefined, 'two edits in a short name: no guess')
  t.equal(nearest('banana', known), undefined)
  t.equal(nearest('hoo', ['hook', 'hop']), 'hook', 'a tie: the first')
})

async function refusal (options: Record<string, unknown>, route?: Record<string, unknown>): Promise<AdmissionOptionError> {
  const app = Fastify()
  try {
    await app.register(admission, options as AdmissionOptions)
    if (route !== undefined) app.get('/x', { config: { admission: route } }, async () => 'ok')
    await app.ready()
  } catch (error) {
    return error as AdmissionOptionError
  } finally {
    await app.close()
  }
  throw new Error('not refused')
}

t.test('an unknown option near a known one: "did you mean"', async (t) => {
  for (const [given, meant] of [['maxInflight', 'maxInFlight'], ['ratelimit', 'rateLimit'], ['keyy', 'key'], ['onlimit', 'onLimit'], ['presure', 'pressure']] as const) {
    const error = await refusal({ [given]: 1 })
    t.type(error, AdmissionOptionError)
    t.equal(error.code, 'ADMISSION_INVALID_OPTION')
    t.equal(error.path, `options.${given}`)
    t.equal(error.message, `Expected \`options.${given}\` to be a known option (unknown option; did you mean \`${meant}\`?), got 1 (number)`)
  }
  const route = await refusal({}, { maxInflight: 1 })
  t.match(route.message, 'Expected `config.admission of GET /x.maxInflight` to be a known option (unknown option; did you mean `maxInFlight`?)')
  const nested = await refusal({ pressure: { maxEventLoopDelai: 10 } })
  t.match(nested.message, 'did you mean `maxEventLoopDelay`?')
  const policy = await refusal({ rateLimit: { limit: 1, windowMs: 1000, brust: 2 } })
  t.match(policy.message, '(no other keys; did you mean `burst`?), got the unknown key "brust"')
  const far = await refusal({ zzz: 1 })
  t.match(far.message, /to be one of maxInFlight, .* \(unknown option\), got 1/, 'nothing near: the list')
})

t.test("every option of @fastify/rate-limit and @fastify/under-pressure named otherwise is told its place here", async (t) => {
  for (const [name, hint] of Object.entries(PLUGIN_HINTS)) {
    const error = await refusal({ [name]: 1 })
    t.equal(error.message, `Expected \`options.${name}\` to be a known option (unknown option; ${hint}), got 1 (number)`, name)
  }
  t.match(PLUGIN_HINTS.max, "@fastify/rate-limit's `max` is `rateLimit: { limit, windowMs }`")
  t.match(PLUGIN_HINTS.keyGenerator, '`key`')
  t.match(PLUGIN_HINTS.timeWindow, 'windowMs')
  t.match(PLUGIN_HINTS.maxEventLoopDelay, '`pressure: { maxEventLoopDelay }`')
  for (const [name, hint] of Object.entries(ROUTE_HINTS)) {
    const error = await refusal({}, { [name]: 1 })
    t.match(error.message, `(unknown option; ${hint})`, `route ${name}`)
  }
  const inPressure = await refusal({ pressure: { message: 'busy' } })
  t.match(inPressure.message, "Expected `pressure.message` to be a known option (unknown option; @fastify/under-pressure's `message` is the plugin's `errorResponseBuilder` here")
  const inStatus = await refusal({ pressure: { exposeStatusRoute: { routeResponseSchemaOpts: {} } } })
  t.match(inStatus.message, '`routeSchemaOpts: { response: { 200: … } }` here')
  // A hint is the key's own, never one the object inherits.
  t.match((await refusal({ toString: 1 })).message, '(unknown option)')
})
