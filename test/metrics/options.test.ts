import t from 'tap'
import Fastify from 'fastify'
import * as prom from 'prom-client'
import { Registry } from 'prom-client'
import { metrics as otel } from '@opentelemetry/api'
import admission, { AdmissionOptionError } from '../../lib/index.js'
import { importPromClient, loadPromClient } from '../../lib/metrics/admission-metrics.js'
import { DEFAULT_BUCKETS, DEFAULT_OTEL_PREFIX, DEFAULT_PREFIX, metricsOption } from '../../lib/metrics/options.js'

function thrown (fn: () => unknown): AdmissionOptionError {
  try {
    fn()
  } catch (error) {
    return error as AdmissionOptionError
  }
  throw new Error('did not throw')
}

t.test('defaults: the prefix, the address as label, Redis-sized buckets; absent is off', async (t) => {
  const registry = new Registry()
  t.equal(metricsOption(undefined), undefined)
  const s = metricsOption({ registry })!
  t.same(s, { registry, prefix: DEFAULT_PREFIX, registration: undefined, buckets: DEFAULT_BUCKETS })
  t.equal(DEFAULT_PREFIX, 'fastify_admission_')
  t.ok(Object.isFrozen(s))
  const custom = metricsOption(Object.assign(Object.create(null) as object, { registry, prefix: 'my:app_', registration: 'edge', buckets: [0.1, 1] }))!
  t.same(custom, { registry, prefix: 'my:app_', registration: 'edge', buckets: [0.1, 1] })
  t.ok(Object.isFrozen(custom.buckets))
  t.ok(metricsOption({ registry: prom.register }), "prom-client's global registry is one")
})

const meterWithout = (method: string): object => {
  const meter = otel.getMeter('shape') as unknown as Record<string, unknown>
  const copy: Record<string, unknown> = {}
  for (const name of ['createHistogram', 'createObservableCounter', 'createObservableUpDownCounter', 'createObservableGauge', 'addBatchObservableCallback', 'removeBatchObservableCallback']) {
    if (name !== method) copy[name] = (meter[name] as (...args: unknown[]) => unknown).bind(meter)
  }
  return copy
}

const BAD: Array<[string, unknown, string, RegExp]> = [
  ['not an object', 5, 'metrics', /Expected `metrics` to be an object \{ registry or meter, prefix\?, registration\?, buckets\? \}, got 5/],
  ['an unknown key', { registry: new Registry(), labels: {} }, 'metrics.labels', /one of registry, meter, prefix, registration, buckets \(unknown option\)/],
  ['no registry', {}, 'metrics', /Expected `metrics` to be an object with a prom-client `registry` .* or an OpenTelemetry `meter` .*, got neither/],
  ['a registry that is not one', { registry: { metrics: () => '' } }, 'metrics.registry', /a prom-client Registry/],
  ['a prefix starting with a digit', { registry: new Registry(), prefix: '1x_' }, 'metrics.prefix', /got '1x_'/],
  ['a prefix with a dash', { registry: new Registry(), prefix: 'my-app_' }, 'metrics.prefix', /Prometheus metric name/],
  ['an empty prefix', { registry: new Registry(), prefix: '' }, 'metrics.prefix', /got ''/],
  ['a prefix that is not a string', { registry: new Registry(), prefix: 7 }, 'metrics.prefix', /got 7/],
  ['an empty registration', { registry: new Registry(), registration: '' }, 'metrics.registration', /a string of 1 to 128 characters/],
  ['a long registration', { registry: new Registry(), registration: 'x'.repeat(129) }, 'metrics.registration', /1 to 128/],
  ['a registration that is not a string', { registry: new Registry(), registration: 1 }, 'metrics.registration', /got 1/],
  ['buckets not an array', { registry: new Registry(), buckets: 0.1 }, 'metrics.buckets', /increasing positive finite numbers/],
  ['no buckets', { registry: new Registry(), buckets: [] }, 'metrics.buckets', /got \[\]/],
  ['too many buckets', { registry: new Registry(), buckets: Array.from({ length: 33 }, (_, i) => i + 1) }, 'metrics.buckets', /1 to 32/],
  ['buckets not increasing', { registry: new Registry(), buckets: [1, 0.5] }, 'metrics.buckets', /got \[ 1, 0\.5 \]/],
  ['a zero bucket', { registry: new Registry(), buckets: [0, 1] }, 'metrics.buckets', /positive/],
  ['an infinite bucket', { registry: new Registry(), buckets: [1, Infinity] }, 'metrics.buckets', /finite/],
  ['a bucket that is not a number', { registry: new Registry(), buckets: ['1'] }, 'metrics.buckets', /increasing/],
  ['both a registry and a meter', { registry: new Registry(), meter: otel.getMeter('x') }, 'metrics', /either `registry` \(prom-client\) or `meter` \(OpenTelemetry\), not both .*Prometheus exporter\), got both/],
  ['a meter that is not an object', { meter: 'meter' }, 'metrics.meter', /Expected `metrics.meter` to be an OpenTelemetry Meter .*, got 'meter'/],
  ['a null meter', { meter: null }, 'metrics.meter', /an OpenTelemetry Meter/],
  ['a meter without createObservableCounter', { meter: meterWithout('createObservableCounter') }, 'metrics.meter', /got an object without createObservableCounter\(\)/],
  ['a meter without removeBatchObservableCallback (before @opentelemetry/api 1.3)', { meter: meterWithout('removeBatchObservableCallback') }, 'metrics.meter', /without removeBatchObservableCallback\(\)/],
  ['a prom-client registry passed as the meter', { meter: new Registry() }, 'metrics.meter', /without createHistogram\(\)/],
  ['a prefix starting with a digit, of a meter', { meter: otel.getMeter('x'), prefix: '1x.' }, 'metrics.prefix', /the start of an OpenTelemetry instrument name .*, got '1x\.'/],
  ['a prefix starting with a dot, of a meter', { meter: otel.getMeter('x'), prefix: '.x' }, 'metrics.prefix', /an ASCII letter, then/],
  ['a prefix with a space, of a meter', { meter: otel.getMeter('x'), prefix: 'my app.' }, 'metrics.prefix', /got 'my app\.'/],
  ['a prefix with a non-ASCII letter, of a meter', { meter: otel.getMeter('x'), prefix: 'é.' }, 'metrics.prefix', /ASCII/],
  ['an empty prefix, of a meter', { meter: otel.getMeter('x'), prefix: '' }, 'metrics.prefix', /got ''/],
  ['a prefix too long for the longest name, of a meter', { meter: otel.getMeter('x'), prefix: 'a'.repeat(231) }, 'metrics.prefix', /at most 230 characters/],
  ['a prefix that is not a string, of a meter', { meter: otel.getMeter('x'), prefix: 7 }, 'metrics.prefix', /got 7/],
  ['a bad registration with a meter', { meter: otel.getMeter('x'), registration: '' }, 'metrics.registration', /1 to 128/],
  ['bad buckets with a meter', { meter: otel.getMeter('x'), buckets: [1, 0.5] }, 'metrics.buckets', /increasing/]
]

for (const [name, value, path, message] of BAD) {
  t.test(`${name}: a typed error at registration, naming the option and showing the value`, async (t) => {
    const error = thrown(() => metricsOption(value))
    t.type(error, AdmissionOptionError)
    t.equal(error.code, 'ADMISSION_INVALID_OPTION')
    t.equal(error.path, path)
    t.match(error.message, message)
    const app = Fastify()
    t.teardown(() => app.close())
    const registered = await app.register(admission, { metrics: value as never }).then(() => undefined, (e: unknown) => e)
    t.type(registered, AdmissionOptionError, 'the plugin refuses it the same way')
    t.equal((registered as AdmissionOptionError).path, path)
  })
}

t.test('a meter: the defaults, and the prefixes OpenTelemetry allows', async (t) => {
  const meter = otel.getMeter('x')
  t.same(metricsOption({ meter }), { meter, prefix: DEFAULT_OTEL_PREFIX, registration: undefined, buckets: DEFAULT_BUCKETS })
  t.equal(DEFAULT_OTEL_PREFIX, 'fastify.admission.')
  for (const prefix of ['a', 'my_app.', 'My-App/gate.', 'fastify_admission_', `a${'b'.repeat(229)}`]) t.equal(metricsOption({ meter, prefix })!.prefix, prefix)
  t.ok(Object.isFrozen(metricsOption({ meter })))
})

t.test('prom-client is loaded only when asked for, and its absence is a typed error saying what to do', async (t) => {
  t.equal(await loadPromClient(async () => prom), prom, 'an ESM namespace with named exports')
  t.equal(await loadPromClient(async () => ({ default: prom })), prom, 'or only a default')
  t.ok((await loadPromClient(importPromClient)).Histogram, 'the real one')
  const missing = Object.assign(new Error("Cannot find package 'prom-client' imported from /app/x.js"), { code: 'ERR_MODULE_NOT_FOUND' })
  const absent = await loadPromClient(async () => { throw missing }).then(() => undefined, (e: unknown) => e) as AdmissionOptionError
  t.type(absent, AdmissionOptionError)
  t.equal(absent.path, 'metrics')
  t.match(absent.message, /Expected `metrics` to be an option whose peer dependency prom-client is installed \(npm install prom-client\), got prom-client could not be loaded \(Cannot find package 'prom-client'/)
  const odd = await loadPromClient(async () => { throw 'a string' }).then(() => undefined, (e: unknown) => e) as AdmissionOptionError
  t.match(odd.message, /could not be loaded \(a string\)/)
  for (const junk of [null, 5, {}, { default: { Counter: class {} } }]) {
    const error = await loadPromClient(async () => junk).then(() => undefined, (e: unknown) => e) as AdmissionOptionError
    t.type(error, AdmissionOptionError)
    t.match(error.message, /without Counter, Gauge and Histogram/)
  }
})
