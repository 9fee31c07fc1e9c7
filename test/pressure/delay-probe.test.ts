import t from 'tap'
import Fastify from 'fastify'
import { codelOptions } from '../../lib/core/index.js'
import admission from '../../lib/index.js'
import { DelayProbe } from '../../lib/pressure/delay-probe.js'
import { eventually, listen } from '../helpers/http.js'
import { rawSocket, statuses } from '../helpers/raw.js'

/** A probe on a clock the test sets. */
function probeAt (targetMs = 5, intervalMs = 100): { probe: DelayProbe, at: (ms: number) => void } {
  let now = 0
  const probe = new DelayProbe({ codel: codelOptions({ targetMs, intervalMs }), clock: () => now })
  return { probe, at: (ms) => { now = ms } }
}

const turnEnds = (): Promise<void> => new Promise((resolve) => { setImmediate(resolve) })

t.test('the lateness of the ticks goes into CoDel; its count sets the cut, which lives on between episodes', async (t) => {
  const { probe, at } = probeAt()
  t.equal(probe.periodMs, 10, 'a tick every interval / 10')
  t.equal(probe.cutMs, 100, 'no standing queue yet: only a request that waited a whole interval is shed')
  at(0)
  probe.start()
  probe.stop()
  // Due at 10: on time, then late by 50 ms at each tick.
  at(10); probe.tick()
  t.equal(probe.delayMs, 0)
  at(70); probe.tick()
  t.equal(probe.delayMs, 50)
  t.equal(probe.codel.shedding, false, 'above target, not for an interval yet')
  at(130); probe.tick()
  at(190); probe.tick()
  t.equal(probe.codel.shedding, true, 'above target for 120 ms: a standing queue')
  t.equal(probe.codel.count, 1)
  t.equal(probe.cutMs, 100, 'count 1: the cut is still the interval')
  at(250); probe.tick()
  t.equal(probe.codel.count, 1, 'the next step is due an interval after the first')
  at(290); probe.tick()
  t.equal(probe.codel.count, 2)
  t.equal(probe.cutMs, 50, 'the cut: interval / count')
  at(361); probe.tick()
  t.equal(probe.codel.count, 3, 'then interval / sqrt(2) later')
  t.equal(probe.cutMs, 100 / 3)
  for (let now = 421; now <= 2_170; now += 60) { at(now); probe.tick() }
  t.equal(probe.codel.count, 81, 'the count stops at the share cap')
  t.equal(probe.cutMs, 5, 'never under the target')
  at(2_165); probe.tick()
  t.equal(probe.delayMs, 0, 'early (a clock that steps back measures no delay)')
  t.equal(probe.codel.shedding, false, 'a sample under target ends the controller\'s episode')
  t.equal(probe.cutMs, 5, 'the cut stays: the count lives on')
  const lastStep = probe.codel.nextAt
  at(lastStep + 1_599); probe.tick()
  t.equal(probe.cutMs, 5, 'within 16 intervals of the last step')
  at(lastStep + 1_600); probe.tick()
  t.equal(probe.cutMs, 100, 'then back to the interval')
  t.equal(new DelayProbe({ codel: codelOptions({ targetMs: 1, intervalMs: 5 }), clock: undefined }).periodMs, 1, 'at least 1 ms')
  t.type(new DelayProbe({ codel: codelOptions(), clock: undefined }).clock(), 'number', 'performance.now by default')
})

t.test('a tick samples the longest turn that read requests since the last tick, when longer than its lateness', async (t) => {
  const { probe, at } = probeAt()
  at(0)
  probe.start()
  probe.stop()
  at(0); probe.sheds()
  at(30); probe.sheds()
  at(42); probe.sheds()
  await turnEnds()
  at(50); probe.sheds()
  at(60); probe.sheds()
  await turnEnds()
  at(10); probe.tick()
  t.equal(probe.delayMs, 42, 'the 42 ms turn: a request that arrived as it began waited that long')
  at(20); probe.tick()
  t.equal(probe.delayMs, 0, 'one tick only: the next measures its own period')
})

t.test('a request is shed once its age in its turn of the loop exceeds the cut', async (t) => {
  const { probe, at } = probeAt()
  at(1000)
  t.equal(probe.sheds(), false, 'the first request of a turn: age 0')
  at(1100)
  t.equal(probe.sheds(), false, 'age 100: at the cut, not over')
  at(1101)
  t.equal(probe.sheds(), true, 'age 101: over it')
  await turnEnds()
  at(1300)
  t.equal(probe.sheds(), false, 'a new turn: age 0')
  probe.cutMs = 5
  at(1305)
  t.equal(probe.sheds(), false)
  at(1306)
  t.equal(probe.sheds(), true)
})

t.test('through the plugin, on the wire: pipelined requests read in one turn, the late ones shed with 503 and Retry-After', async (t) => {
  // A clock that moves 30 s at each read: ages of 0, 30, 60, 90, 120 s in one turn of five.
  let now = 0
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: false, queueDelay: { targetMs: 5_000, intervalMs: 100_000, clock: () => (now += 30_000) } })
  app.get('/', async () => 'ok')
  const port = await listen(app)
  const { socket, received } = await rawSocket(port)
  t.teardown(() => socket.destroy())
  const five = 'GET / HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(5)
  socket.write(five)
  await eventually(() => statuses(received()).length === 5)
  t.same(statuses(received()), [200, 200, 200, 200, 503], 'the fifth waited 120 s in its turn: over the 100 s interval')
  t.ok(received().includes('retry-after: 100'), 'Retry-After: the interval, in seconds')
  t.ok(received().includes('Server is overloaded, retry in 100 seconds'))
  t.match(app.admission.stats(), { admitted: 4, shed: 1, pressure: { shed: { queueDelay: 1 } } })
  t.match(app.admission.pressure(), { underPressure: false, queueDelay: { standing: false, cutMs: 100_000, targetMs: 5_000, intervalMs: 100_000 } })
})

t.test('the probe ticks on its timer once the app is ready, and stops at close', async (t) => {
  let reads = 0
  const app = Fastify()
  await app.register(admission, { rateLimit: false, queueDelay: { clock: () => ++reads * 10 } })
  await app.ready()
  const hold = setInterval(() => {}, 1000)
  await eventually(() => reads >= 4)
  clearInterval(hold)
  await app.close()
  const after = reads
  await new Promise((resolve) => setTimeout(resolve, 40))
  t.equal(reads, after, 'no tick after close')
  t.match(app.admission.pressure(), { queueDelay: { delayMs: 0 } }, 'a tick every 10 ms, on a clock 10 ms a read: on time')
})
