// Refusals by reason, as a map of counts: a reason counted that no plan expected starts from 1;
// added up over gates in the order of the names; each pressure signal and queueing delay by its name.
import t from 'tap'
import { countReason, expectReasons, reasonRecord, SHED_REASONS, type ReasonCounts } from '../../lib/metrics/reasons.js'

t.test('counted, expected at 0, added up over gates in the order of the names', async (t) => {
  const one: ReasonCounts = new Map()
  const two: ReasonCounts = new Map()
  expectReasons(one, ['quota:default', 'in-flight'])
  countReason(one, 'in-flight')
  countReason(two, 'queue-delay')
  expectReasons(two, ['queue-delay', 'in-flight'])
  t.same(reasonRecord([one]), { 'in-flight': 1, 'quota:default': 0 })
  t.same(reasonRecord([one, two]), { 'in-flight': 1, 'queue-delay': 1, 'quota:default': 0 }, 'expecting a reason counted already keeps its count')
  t.same(reasonRecord([]), {})
})

t.test('a pressure shed\'s reason: the signal by its name, or queueing delay', async (t) => {
  t.same(SHED_REASONS, {
    eventLoopDelay: 'pressure:eventLoopDelay',
    heapUsedBytes: 'pressure:heapUsedBytes',
    rssBytes: 'pressure:rssBytes',
    healthCheck: 'pressure:healthCheck',
    eventLoopUtilization: 'pressure:eventLoopUtilization',
    queueDelay: 'queue-delay'
  })
})
