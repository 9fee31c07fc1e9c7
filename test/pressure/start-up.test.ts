import t from 'tap'
import Fastify from 'fastify'
import admission from '../../lib/index.js'

// Regression: `pressure: { maxEventLoopUtilization: 0.98 }` (the under-pressure guide's example)
// shed 38 of 61 requests in the first 1.5 s of an idle server: the first sample, taken as the
// readings started at ready(), measured utilization over a few microseconds of the start itself.
t.test('an idle server just started sheds nothing on event-loop utilization', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: false, pressure: { maxEventLoopUtilization: 0.98 } })
  app.get('/', async () => 'ok')
  await app.ready()
  const statuses = []
  for (let i = 0; i < 20; i++) statuses.push((await app.inject('/')).statusCode)
  t.same(statuses, Array(20).fill(200))
  t.equal(app.admission.pressure()?.underPressure, false)
  t.equal(app.admission.pressure()?.readings?.eventLoopUtilization, 0, "no reading yet: the first sample's window was too short to measure")
})
