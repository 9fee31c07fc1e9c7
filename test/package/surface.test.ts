import t from 'tap'
import { exportedNames, optionSettings } from '../../scripts/surface.js'

// The main entry exports what an application uses (docs/decisions.md, "The main entry's
// surface"), counted as TypeScript counts the declarations: `node --import tsx scripts/surface.ts`
// prints the names. `./core` is the specification's pure core and is not held to this bound.

t.test('the main entry exports at most 45 names', async (t) => {
  const names = exportedNames('lib/index.ts')
  t.ok(names.length <= 45, `${names.length} names: ${names.join(' ')}`)
  for (const name of ['default', 'admission', 'memoryBackend', 'redisBackend', 'AdmissionError', 'AdmissionOptionError', 'AdmissionCallbackError', 'AdmissionRefusalError', 'AdmissionOptions', 'AdmissionRouteOptions', 'DECISION_CHANNEL', 'TYPE_EVENT_LOOP_DELAY']) {
    t.ok(names.includes(name), `${name} is exported`)
  }
})

t.test('no names of a kind\'s cases: an error is checked by its kind and told apart by its code', async (t) => {
  const names = exportedNames('lib/index.ts')
  for (const name of ['AdmissionKeyError', 'AdmissionAllowListError', 'AdmissionTierError', 'AdmissionChargeError', 'AdmissionScopeError']) t.notOk(names.includes(name), name)
})

t.test('options that describe one thing are one option: the moved ones are settings of the option they belong to', async (t) => {
  const settings = optionSettings()
  const plugin = settings.filter((s) => s.startsWith('options.') && s.split('.').length === 2)
  t.ok(plugin.length <= 25, `${plugin.length} options of the plugin: ${plugin.join(' ')}`)
  for (const gone of ['limitStatusCode', 'responseBody', 'fastRefusals', 'allowListSkipsShedding', 'criticalReserve', 'maxIdentities']) t.notOk(plugin.includes(`options.${gone}`), gone)
  for (const setting of ['options.refusal.body', 'options.refusal.limitStatusCode', 'options.refusal.fast', 'options.allowList.skipsShedding', 'options.maxInFlight.criticalReserve', 'options.errorResponseBuilder', 'route.errorResponseBuilder', 'route.allowList']) {
    t.ok(settings.includes(setting), setting)
  }
})
