import t from 'tap'
import Fastify from 'fastify'
import { AdmissionOptionError } from '../../lib/gate/errors.js'
import { validateOptions } from '../../lib/gate/options/options.js'
import admission from '../../lib/index.js'
import { pressureSettings, queueDelaySettings } from '../../lib/pressure/options.js'
import { thrown } from '../helpers/errors.js'

const readings = (): { eventLoopDelay: number, eventLoopUtilization: number, heapUsedBytes: number, rssBytes: number } =>
  ({ eventLoopDelay: 0, eventLoopUtilization: 0, heapUsedBytes: 0, rssBytes: 0 })
const check = async (): Promise<boolean> => true

// [options.pressure or options.queueDelay, the path the error names, the value it shows]
const BAD: Array<[option: 'pressure' | 'queueDelay', value: unknown, path: string, shown: string]> = [
  ['pressure', 5, 'pressure', '5 (number)'],
  ['pressure', { maxEventLoopDelay: 0 }, 'pressure.maxEventLoopDelay', '0 (number)'],
  ['pressure', { maxEventLoopDelay: 1.5 }, 'pressure.maxEventLoopDelay', '1.5 (number)'],
  ['pressure', { maxEventLoopUtilization: 0 }, 'pressure.maxEventLoopUtilization', '0 (number)'],
  ['pressure', { maxEventLoopUtilization: 1 }, 'pressure.maxEventLoopUtilization', '1 (number)'],
  ['pressure', { maxEventLoopUtilization: NaN }, 'pressure.maxEventLoopUtilization', 'NaN (number)'],
  ['pressure', { maxEventLoopUtilization: '0.9' }, 'pressure.maxEventLoopUtilization', "'0.9' (string)"],
  ['pressure', { maxHeapUsedBytes: -1 }, 'pressure.maxHeapUsedBytes', '-1 (number)'],
  ['pressure', { maxRssBytes: 1e300 }, 'pressure.maxRssBytes', '1e+300 (number)'],
  ['pressure', { maxRssBytes: 1, sampleInterval: 5 }, 'pressure.sampleInterval', '5 (number)'],
  ['pressure', { maxRssBytes: 1, sampleInterval: 2000, retryAfter: 1 }, 'pressure.retryAfter', '1 (number)'],
  ['pressure', { maxRssBytes: 1, retryAfter: 0 }, 'pressure.retryAfter', '0 (number)'],
  ['pressure', { maxRssBytes: 1, nope: 1 }, 'pressure.nope', '1 (number)'],
  ['pressure', { maxRssBytes: 1, pressureHandler: 'x' }, 'pressure.pressureHandler', "'x' (string)"],
  ['pressure', { maxRssBytes: 1, readings: {} }, 'pressure.readings', '{}'],
  ['pressure', { healthCheck: 1, healthCheckInterval: 10 }, 'pressure.healthCheck', '1 (number)'],
  ['pressure', { healthCheck: check }, 'pressure.healthCheckInterval', 'undefined (undefined)'],
  ['pressure', { maxRssBytes: 1, healthCheckInterval: 10 }, 'pressure.healthCheckInterval', '10 (number)'],
  ['pressure', { healthCheck: check, healthCheckInterval: 3000, retryAfter: 2 }, 'pressure.retryAfter', '2 (number)'],
  ['pressure', { exposeStatusRoute: 'status' }, 'pressure.exposeStatusRoute', "'status' (string)"],
  ['pressure', { exposeStatusRoute: 1 }, 'pressure.exposeStatusRoute', '1 (number)'],
  ['pressure', { exposeStatusRoute: { url: 'x' } }, 'pressure.exposeStatusRoute.url', "'x' (string)"],
  ['pressure', { exposeStatusRoute: { path: '/x' } }, 'pressure.exposeStatusRoute.path', "'/x' (string)"],
  ['pressure', { exposeStatusRoute: { routeOpts: 1 } }, 'pressure.exposeStatusRoute.routeOpts', '1 (number)'],
  ['pressure', { exposeStatusRoute: { routeOpts: { config: 1 } } }, 'pressure.exposeStatusRoute.routeOpts.config', '1 (number)'],
  ['pressure', { exposeStatusRoute: { routeOpts: { config: { admission: { cost: 1 } } } } }, 'pressure.exposeStatusRoute.routeOpts.config.admission', '{ cost: 1 }'],
  ['pressure', { exposeStatusRoute: { routeOpts: { handler: check } } }, 'pressure.exposeStatusRoute.routeOpts.handler', '[AsyncFunction: check]'],
  ['pressure', { exposeStatusRoute: { routeSchemaOpts: [] } }, 'pressure.exposeStatusRoute.routeSchemaOpts', '[]'],
  ['pressure', { exposeStatusRoute: '/:section' }, 'pressure.exposeStatusRoute', "'/:section' (string)"],
  ['pressure', { exposeStatusRoute: { url: '/health/*' } }, 'pressure.exposeStatusRoute.url', "'/health/*' (string)"],
  ['pressure', { exposeStatusRoute: { expose: 'all' } }, 'pressure.exposeStatusRoute.expose', "'all' (string)"],
  ['queueDelay', 'yes', 'queueDelay', "'yes' (string)"],
  ['queueDelay', { targetMs: 0 }, 'queueDelay.targetMs', '0 (number)'],
  ['queueDelay', { intervalMs: 2.5 }, 'queueDelay.intervalMs', '2.5 (number)'],
  ['queueDelay', { targetMs: 100 }, 'queueDelay.targetMs', '100 (number)'],
  ['queueDelay', { targetMs: 10, intervalMs: 10 }, 'queueDelay.targetMs', '10 (number)'],
  ['queueDelay', { clock: 0 }, 'queueDelay.clock', '0 (number)'],
  ['queueDelay', { utilization: 1 }, 'queueDelay.utilization', '1 (number)'],
  ['queueDelay', { step: 0.5 }, 'queueDelay.step', '0.5 (number)']
]

t.test('every bad pressure or queueDelay option is a typed error naming it and showing the value, at registration', async (t) => {
  for (const [option, value, path, shown] of BAD) {
    const error = thrown(() => validateOptions({ [option]: value }))
    t.ok(error instanceof AdmissionOptionError, `${path}: an AdmissionOptionError`)
    const e = error as AdmissionOptionError
    t.equal(e.code, 'ADMISSION_INVALID_OPTION')
    t.equal(e.path, path, `${JSON.stringify(value)}: the path`)
    t.ok(e.message.includes(`got ${shown}`), `${path}: the message shows ${shown}: ${e.message}`)
  }
  // Through register(): the registration fails, with the same error.
  const app = Fastify()
  await t.rejects(async () => { await app.register(admission, { pressure: { maxEventLoopDelay: 0 } }) }, { code: 'ADMISSION_INVALID_OPTION', path: 'pressure.maxEventLoopDelay' })
})

t.test('good options: defaults said, values kept, frozen; absent or false is off', async (t) => {
  t.equal(validateOptions({}).pressure, undefined)
  t.equal(validateOptions({}).queueDelay, undefined)
  t.equal(queueDelaySettings(false), undefined)
  t.equal(queueDelaySettings(undefined), undefined)
  t.same(queueDelaySettings(true), { codel: { targetMs: 5, intervalMs: 100, step: 0.1, maxShare: 0.9 }, clock: undefined, utilization: undefined })
  t.same(queueDelaySettings({ targetMs: 2, intervalMs: 50 })?.codel, { targetMs: 2, intervalMs: 50, step: 0.1, maxShare: 0.9 })
  const p = pressureSettings({ maxEventLoopDelay: 50, maxEventLoopUtilization: 0.98, maxHeapUsedBytes: 1e9, maxRssBytes: 2e9, readings })!
  t.same(p.limits, { eventLoopDelay: 50, eventLoopUtilization: 0.98, heapUsedBytes: 1e9, rssBytes: 2e9 })
  t.equal(p.sampleInterval, 1000, 'under-pressure\'s default sample interval')
  t.equal(p.retryAfter, 1, 'the sample interval, rounded up to seconds')
  t.equal(p.statusRoute, undefined)
  t.equal(p.readings, readings)
  t.ok(Object.isFrozen(p) && Object.isFrozen(p.limits))
  t.equal(pressureSettings({ maxRssBytes: 1, sampleInterval: 2500 })!.retryAfter, 3)
  t.equal(pressureSettings({ maxRssBytes: 1, retryAfter: 10 })!.retryAfter, 10)
  t.equal(pressureSettings({ healthCheck: check, healthCheckInterval: 4500 })!.retryAfter, 5, 'the health check interval, when longer')
  t.same(pressureSettings({ exposeStatusRoute: true })!.statusRoute, { url: '/status', routeOpts: {}, schema: undefined, expose: 'status' })
  t.same(pressureSettings({ exposeStatusRoute: '/alive' })!.statusRoute, { url: '/alive', routeOpts: {}, schema: undefined, expose: 'status' })
  t.same(pressureSettings({ exposeStatusRoute: false, maxRssBytes: 1 })!.statusRoute, undefined)
  t.same(pressureSettings({ exposeStatusRoute: {} })!.statusRoute, { url: '/status', routeOpts: {}, schema: undefined, expose: 'status' })
  t.same(pressureSettings({ exposeStatusRoute: { url: '/up', routeOpts: { logLevel: 'debug' }, routeSchemaOpts: { hide: true }, expose: 'details' } })!.statusRoute,
    { url: '/up', routeOpts: { logLevel: 'debug' }, schema: { hide: true }, expose: 'details' })
  t.ok(pressureSettings({ healthCheck: check, exposeStatusRoute: true }), 'a health check the status route runs needs no interval')
})
