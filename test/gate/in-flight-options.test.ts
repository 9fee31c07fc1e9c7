import t, { type Test } from 'tap'
import Fastify from 'fastify'
import { validateOptions, validateRouteOptions } from '../../lib/gate/options/options.js'
import { AdmissionOptionError } from '../../lib/gate/errors.js'
import admission from '../../lib/index.js'
import { adaptiveLimitOptions } from '../../lib/core/adaptive/limit.js'
import { WINDOW_FAST_WEIGHT } from '../../lib/gate/options/in-flight-options.js'

// The adaptive `maxInFlight`, its `criticalReserve` and a route's `priority`: checked at registration
// (routes at ready()), each refusal an AdmissionOptionError naming the option and showing the value.

function rejected (t: Test, fn: () => unknown, path: string, value: unknown, shown: string, expected?: string): void {
  let error: unknown
  try { fn() } catch (e) { error = e }
  if (!(error instanceof AdmissionOptionError)) { t.fail(`${path}: expected an AdmissionOptionError, got ${String(error)}`); return }
  t.equal(error.code, 'ADMISSION_INVALID_OPTION', `${path} = ${shown}: code`)
  t.equal(error.path, path, `${path} = ${shown}: path`)
  if (typeof value === 'object' && value !== null) t.same(error.value, value)
  else t.ok(Object.is(error.value, value), `${path} = ${shown}: value`)
  t.ok(error.message.includes(`got ${shown}`), `${path}: shows ${shown}: ${error.message}`)
  if (expected !== undefined) t.ok(error.message.includes(expected), `${path}: says ${expected}: ${error.message}`)
}

t.test('maxInFlight: { adaptive: true } starts sane with nothing else', async (t) => {
  const s = validateOptions({ maxInFlight: { adaptive: true } })
  t.same(s.maxInFlight, { adaptive: true, limit: adaptiveLimitOptions({ fastWeight: WINDOW_FAST_WEIGHT }) }, "the core's defaults, but for the fast RTT's weight per window")
  t.ok(Object.isFrozen(s.maxInFlight))
  t.equal(s.criticalReserve, 0.2)
  const all = validateOptions({ maxInFlight: { adaptive: true, min: 2, max: 50, initial: 10, tolerance: 2, probeIntervalMs: 5000, criticalReserve: 0 } })
  t.match(all.maxInFlight, { adaptive: true, limit: { min: 2, max: 50, initial: 10, tolerance: 2, probeIntervalMs: 5000, smoothing: 0.2 } })
  t.equal(all.criticalReserve, 0)
  t.match(validateOptions({ maxInFlight: { adaptive: true, max: 5 } }).maxInFlight, { limit: { max: 5, initial: 5 } }, 'the default initial, clamped into [min, max]')
  t.match(validateOptions({ maxInFlight: { adaptive: true, min: 30 } }).maxInFlight, { limit: { min: 30, initial: 30 } })
  t.match(validateOptions({ maxInFlight: Object.assign(Object.create(null) as object, { adaptive: true }) }).maxInFlight, { adaptive: true }, 'a null-prototype bag')
})

t.test("maxInFlight: 'auto' is the adaptive limit with its defaults and queueing-delay shedding, unless queueDelay says otherwise", async (t) => {
  const auto = validateOptions({ maxInFlight: 'auto' })
  t.same(auto.maxInFlight, validateOptions({ maxInFlight: { adaptive: true } }).maxInFlight)
  t.same(auto.queueDelay, validateOptions({ queueDelay: true }).queueDelay)
  t.equal(validateOptions({ maxInFlight: 'auto', queueDelay: false }).queueDelay, undefined, 'queueDelay: false turns that half off')
  t.match(validateOptions({ maxInFlight: 'auto', queueDelay: { targetMs: 10 } }).queueDelay, { codel: { targetMs: 10 } })
  t.equal(validateOptions({ maxInFlight: { adaptive: true } }).queueDelay, undefined, 'the adaptive object alone adds nothing')
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { maxInFlight: 'auto', rateLimit: false })
  app.get('/', async () => 'ok')
  t.equal((await app.inject('/')).statusCode, 200)
  t.match(app.admission.stats(), { limit: 20 }, 'the adaptive limit starts at its initial 20')
  t.match(app.admission.pressure(), { queueDelay: { targetMs: 5, intervalMs: 100 } }, 'and the queue-delay shedder is on')
  rejected(t, () => validateOptions({ maxInFlight: 'Auto' }), 'maxInFlight', 'Auto', "'Auto' (string)", "'auto', a positive safe integer or false")
})

t.test('maxInFlight: what is not a limit', async (t) => {
  const bad = (value: unknown, path: string, shown: string, expected?: string): void => { rejected(t, () => validateOptions({ maxInFlight: value }), path, value, shown, expected) }
  bad({ max: 5 }, 'maxInFlight', '{ max: 5 }', '{ limit, criticalReserve? }, { adaptive: true, min?, max?, initial?, tolerance?, probeIntervalMs?, criticalReserve? } or { fleet, refreshMs?, adaptive?, …, criticalReserve? }')
  bad(true, 'maxInFlight', 'true (boolean)', 'a positive safe integer or false')
  bad([3], 'maxInFlight', '[ 3 ]')
  rejected(t, () => validateOptions({ maxInFlight: { adaptive: false } }), 'maxInFlight.adaptive', false, 'false (boolean)', 'true (a fixed limit is a number)')
  rejected(t, () => validateOptions({ maxInFlight: { adaptive: 1 } }), 'maxInFlight.adaptive', 1, '1 (number)')
  rejected(t, () => validateOptions({ maxInFlight: { adaptive: true, smoothing: 0.5 } }), 'maxInFlight.smoothing', 0.5, '0.5 (number)', 'one of adaptive, min, max, initial, tolerance, probeIntervalMs, criticalReserve (unknown option)')
  for (const key of ['min', 'max', 'initial', 'probeIntervalMs']) {
    for (const [value, shown] of [[0, '0 (number)'], [1.5, '1.5 (number)'], ['5', "'5' (string)"], [Number.NaN, 'NaN (number)']] as const) {
      rejected(t, () => validateOptions({ maxInFlight: { adaptive: true, [key]: value } }), `maxInFlight.${key}`, value, shown, 'a positive safe integer')
    }
  }
  rejected(t, () => validateOptions({ maxInFlight: { adaptive: true, min: 10, max: 5 } }), 'maxInFlight.max', 5, '5 (number)', 'at least min (10)')
  rejected(t, () => validateOptions({ maxInFlight: { adaptive: true, min: 2000 } }), 'maxInFlight.min', 2000, '2000 (number)', 'at most max (1000, the default)')
  rejected(t, () => validateOptions({ maxInFlight: { adaptive: true, min: 5, initial: 4 } }), 'maxInFlight.initial', 4, '4 (number)', 'from min to max (5 to 1000)')
  rejected(t, () => validateOptions({ maxInFlight: { adaptive: true, max: 5, initial: 6 } }), 'maxInFlight.initial', 6, '6 (number)')
  for (const [value, shown] of [[0.9, '0.9 (number)'], [11, '11 (number)'], [Number.NaN, 'NaN (number)'], [Infinity, 'Infinity (number)'], ['2', "'2' (string)"]] as const) {
    rejected(t, () => validateOptions({ maxInFlight: { adaptive: true, tolerance: value } }), 'maxInFlight.tolerance', value, shown, 'a number from 1 to 10')
  }
  // The toolkit's rules for option bags: no getter is run, no Proxy is read.
  let invoked = 0
  const getter = Object.defineProperty({ adaptive: true }, 'min', { enumerable: true, get () { invoked++; return 2 } })
  rejected(t, () => validateOptions({ maxInFlight: getter }), 'maxInFlight.min', Object.getOwnPropertyDescriptor(getter, 'min'), 'an accessor property', 'a data property')
  t.equal(invoked, 0)
  const proxy = new Proxy({ adaptive: true }, {})
  let error: unknown
  try { validateOptions({ maxInFlight: proxy }) } catch (e) { error = e }
  t.type(error, AdmissionOptionError)
  t.match((error as Error).message, 'a Proxy, which is not read')
})

t.test('maxInFlight.criticalReserve: a share of the limit below 1, written with the limit', async (t) => {
  t.equal(validateOptions({ maxInFlight: { limit: 8, criticalReserve: 0.5 } }).criticalReserve, 0.5)
  t.equal(validateOptions({ maxInFlight: { limit: 8 } }).maxInFlight, 8, '{ limit } is the fixed limit')
  t.equal(validateOptions({ maxInFlight: 8 }).criticalReserve, 0.2, 'the default')
  t.equal(validateOptions({ maxInFlight: { limit: 8 } }).criticalReserve, 0.2, 'the default, in the object')
  t.equal(validateOptions({}).criticalReserve, 0, 'no gate: nothing to reserve')
  t.equal(validateOptions({ maxInFlight: { fleet: 40, criticalReserve: 0.1 } }).criticalReserve, 0.1, "a fleet's")
  t.equal(validateOptions({ maxInFlight: { fleet: 40, adaptive: true, min: 2, criticalReserve: 0.1 } }).criticalReserve, 0.1, 'an adaptive fleet\'s')
  const auto = validateOptions({ maxInFlight: { limit: 'auto', criticalReserve: 0.3 } })
  t.same([auto.maxInFlight, auto.criticalReserve, auto.queueDelay !== undefined], [validateOptions({ maxInFlight: 'auto' }).maxInFlight, 0.3, true], "{ limit: 'auto' } is 'auto', queueing delay included")
  for (const [value, shown] of [[1, '1 (number)'], [-0.1, '-0.1 (number)'], [Number.NaN, 'NaN (number)'], ['0.1', "'0.1' (string)"], [null, 'null']] as const) {
    rejected(t, () => validateOptions({ maxInFlight: { limit: 8, criticalReserve: value } }), 'maxInFlight.criticalReserve', value, shown, 'a share of the in-flight limit, from 0 to below 1')
    rejected(t, () => validateOptions({ maxInFlight: { adaptive: true, criticalReserve: value } }), 'maxInFlight.criticalReserve', value, shown, 'a share of the in-flight limit, from 0 to below 1')
  }
  rejected(t, () => validateOptions({ maxInFlight: { limit: 0 } }), 'maxInFlight.limit', 0, '0 (number)', "a positive safe integer or 'auto'")
  rejected(t, () => validateOptions({ maxInFlight: { limit: 8, reserve: 0.1 } }), 'maxInFlight.reserve', 0.1, '0.1 (number)', 'unknown option')
  rejected(t, () => validateOptions({ maxInFlight: 8, criticalReserve: 0.2 }), 'options.criticalReserve', 0.2, '0.2 (number)', 'moved to `maxInFlight: { limit, criticalReserve }`')
})

t.test("a route's priority: critical, normal or sheddable, only where the plugin sheds", async (t) => {
  const gated = validateOptions({ maxInFlight: 8 })
  for (const priority of ['critical', 'normal', 'sheddable'] as const) {
    t.match(validateRouteOptions({ priority }, 'GET /x', gated), { priority })
  }
  t.match(validateRouteOptions({ priority: 'critical' }, 'GET /x', validateOptions({ maxInFlight: { adaptive: true } })), { priority: 'critical' })
  for (const [value, shown] of [['high', "'high' (string)"], [1, '1 (number)'], ['Critical', "'Critical' (string)"]] as const) {
    rejected(t, () => validateRouteOptions({ priority: value }, 'GET /x', gated), 'config.admission of GET /x.priority', value, shown, "'critical', 'normal' or 'sheddable'")
  }
  rejected(t, () => validateRouteOptions({ priority: 'critical' }, 'GET /x', validateOptions({})), 'config.admission of GET /x.priority', 'critical', "'critical' (string)", 'unset when the plugin has no `maxInFlight`')
})

t.test('bad options fail registration; a bad priority fails ready()', async (t) => {
  const app = Fastify()
  await t.rejects(async () => { await app.register(admission, { maxInFlight: { adaptive: true, min: 0 } }) }, { code: 'ADMISSION_INVALID_OPTION', path: 'maxInFlight.min' })
  await app.close()
  const other = Fastify()
  await other.register(admission, { maxInFlight: 4 })
  other.get('/x', { config: { admission: { priority: 'urgent' as 'critical' } } }, async () => 'x')
  await t.rejects(async () => { await other.ready() }, { code: 'ADMISSION_INVALID_OPTION', path: 'config.admission of GET /x.priority' })
  await other.close()
})
