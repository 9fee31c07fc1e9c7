import t, { type Test } from 'tap'
import Fastify from 'fastify'
import { codelOptions } from '../../lib/core/index.js'
import admission from '../../lib/index.js'
import { DelayProbe } from '../../lib/pressure/delay-probe.js'
import { eventually, listen } from '../helpers/http.js'
import { rawSocket, statuses } from '../helpers/raw.js'
import { readFileSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { connect as connectTls } from 'node:tls'

/** A probe on a clock and a loop utilization the test sets. */
function probeAt (targetMs = 5, intervalMs = 100): { probe: DelayProbe, at: (ms: number) => void, busy: (share: number) => void } {
  let now = 0
  let utilization = 0
  const probe = new DelayProbe({ codel: codelOptions({ targetMs, intervalMs }), clock: () => now, utilization: () => utilization })
  return { probe, at: (ms) => { now = ms }, busy: (share) => { utilization = share } }
}

/** A connection, as the probe sees it (an object to remember). */
const socketLike = (): Socket => ({}) as unknown as Socket
const one = socketLike()

const turnEnds = (): Promise<void> => new Promise((resolve) => { setImmediate(resolve) })

t.test('the lateness of the ticks goes into CoDel; its count sets the cut, which lives on between episodes', async (t) => {
  const { probe, at } = probeAt()
  t.equal(probe.periodMs, 10, 'a tick every interval / 10')
  t.equal(probe.cutMs, 100, 'no standing queue yet: only a request that waited a whole interval is shed')
  t.equal(probe.standing, false, 'retries are not shed apart')
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
  t.equal(probe.standing, true, 'retries are shed')
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
  t.equal(probe.standing, true, 'and retries are still shed while it is short')
  const lastStep = probe.codel.nextAt
  at(lastStep + 1_599); probe.tick()
  t.equal(probe.cutMs, 5, 'within 16 intervals of the last step')
  at(lastStep + 1_600); probe.tick()
  t.equal(probe.cutMs, 100, 'then back to the interval')
  t.equal(new DelayProbe({ codel: codelOptions({ targetMs: 1, intervalMs: 5 }), clock: undefined, utilization: undefined }).periodMs, 1, 'at least 1 ms')
  t.type(new DelayProbe({ codel: codelOptions(), clock: undefined, utilization: undefined }).clock(), 'number', 'performance.now by default')
})

t.test('a tick samples the longest turn that read requests since the last tick, when longer than its lateness', async (t) => {
  const { probe, at } = probeAt()
  at(0)
  probe.start()
  probe.stop()
  at(0); probe.sheds(one)
  at(30); probe.sheds(one)
  at(42); probe.sheds(one)
  await turnEnds()
  at(50); probe.sheds(one)
  at(60); probe.sheds(one)
  await turnEnds()
  at(10); probe.tick()
  t.equal(probe.delayMs, 42, 'the 42 ms turn: a request that arrived as it began waited that long')
  at(20); probe.tick()
  t.equal(probe.delayMs, 0, 'one tick only: the next measures its own period')
})

t.test('a request is shed once its age in its turn of the loop exceeds the cut', async (t) => {
  const { probe, at } = probeAt()
  at(1000)
  t.equal(probe.sheds(one), false, 'the first request of a turn: age 0')
  at(1100)
  t.equal(probe.sheds(one), false, 'age 100: at the cut, not over')
  at(1101)
  t.equal(probe.sheds(one), true, 'age 101: over it')
  await turnEnds()
  at(1300)
  t.equal(probe.sheds(one), false, 'a new turn: age 0')
  probe.cutMs = 5
  at(1305)
  t.equal(probe.sheds(one), false)
  at(1306)
  t.equal(probe.sheds(one), true)
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

t.test('the accept queue stands once a connection was accepted in every tick of an interval on a busy loop; the first request of one accepted then is shed', async (t) => {
  const { probe, at, busy } = probeAt()
  busy(1)
  let now = 0
  const tickWith = (accepts: number): void => {
    for (let i = 0; i < accepts; i++) probe.accepted(socketLike())
    now += 10
    at(now)
    probe.tick()
  }
  for (let i = 0; i < 8; i++) tickWith(1)
  const before = socketLike()
  probe.accepted(before)
  tickWith(0)
  t.equal(probe.acceptQueueStanding, false, 'nine ticks (90 ms): less than an interval')
  tickWith(0)
  t.equal(probe.acceptQueueStanding, false, 'a tick without an accept: the backlog was empty at some point')
  for (let i = 0; i < 10; i++) tickWith(1)
  t.equal(probe.acceptQueueStanding, true, 'ten ticks in a row, a whole interval')
  t.equal(probe.codel.shedding || probe.cutMs < 100, false, 'the loop itself on time…')
  t.equal(probe.standing, true, '…but connections wait to be accepted: retries are shed')
  const waited = socketLike()
  probe.accepted(waited)
  t.equal(probe.sheds(waited), true, 'accepted behind a standing queue: its first request is shed')
  t.equal(probe.sheds(waited), false, 'its next requests are judged by their age')
  t.equal(probe.sheds(before), false, 'a connection accepted before the queue stood is not')
  busy(0.97)
  tickWith(1)
  t.equal(probe.acceptQueueStanding, false, 'a loop that idled (utilization under 0.98): an idle loop woken by each connection')
  const later = socketLike()
  probe.accepted(later)
  t.equal(probe.sheds(later), false, 'accepted once it no longer stands')
})

t.test('a connection marked in a standing accept queue that sends nothing for an interval is forgotten', async (t) => {
  const { probe, at, busy } = probeAt()
  busy(1)
  let now = 0
  for (let i = 0; i < 10; i++) { probe.accepted(socketLike()); now += 10; at(now); probe.tick() }
  t.equal(probe.acceptQueueStanding, true)
  const silent = socketLike()
  probe.accepted(silent)
  const quiet = socketLike()
  probe.accepted(quiet)
  now += 10; at(now); probe.tick()
  now += 10; at(now); probe.tick()
  t.equal(probe.acceptQueueStanding, false, 'no accept in this tick')
  t.equal(probe.sheds(quiet), true, 'within an interval of its accept: still shed')
  at(now + 90); probe.tick()
  at(now + 91); probe.tick()
  t.equal(probe.sheds(silent), false, 'more than an interval later: forgotten')
})

/** Opens connections one after another until `stop()`: an accept in every tick of the probe. */
function connectionStorm (port: number): { stop: () => void } {
  let stopped = false
  const open = (): void => {
    if (stopped) return
    const socket = connect(port, '127.0.0.1', () => { socket.destroy(); setImmediate(open) })
    socket.on('error', () => { if (!stopped) setImmediate(open) })
  }
  open()
  return { stop: () => { stopped = true } }
}

const GET = 'GET / HTTP/1.1\r\nHost: x\r\n\r\n'
interface Wire { write: (text: string) => void, received: () => string, close: () => void }

/**
 * An app whose loop reads as always busy, under a storm of connections until the accept queue
 * stands; then new connections (by `open`) until one's first request is shed (a tick may pass
 * without an accept), and that connection's second request. Answers the two statuses and the text.
 */
async function shedThenServed (t: Test, https: { key: Buffer, cert: Buffer } | undefined, open: (port: number) => Promise<Wire>): Promise<{ seen: number[], text: string, shed: number }> {
  // One type for both: the TLS server is an HTTP/1.1 server as far as the plugin goes.
  const app = (https === undefined ? Fastify() : Fastify({ https })) as unknown as ReturnType<typeof Fastify>
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: false, queueDelay: { targetMs: 1, intervalMs: 20, utilization: () => 1 } })
  app.get('/', async () => 'ok')
  const port = await listen(app)
  const storm = connectionStorm(port)
  t.teardown(storm.stop)
  t.ok(await eventually(() => app.admission.pressure()!.queueDelay!.acceptQueueStanding, 10_000), 'the accept queue stands')
  let seen: number[] = []
  let text = ''
  for (let attempt = 0; attempt < 50 && seen[0] !== 503; attempt++) {
    const wire = await open(port)
    wire.write(GET)
    await eventually(() => statuses(wire.received()).length === 1)
    if (statuses(wire.received())[0] === 503) {
      storm.stop()
      wire.write(GET)
      await eventually(() => statuses(wire.received()).length === 2)
    }
    seen = statuses(wire.received())
    text = wire.received()
    wire.close()
  }
  storm.stop()
  return { seen, text, shed: app.admission.stats().pressure!.shed.queueDelay }
}

t.test('on the wire: with the loop busy and new connections in every tick, a new connection\'s first request is shed with Retry-After, its second served', async (t) => {
  const { seen, text, shed } = await shedThenServed(t, undefined, async (port) => {
    const { socket, received } = await rawSocket(port)
    return { write: (s) => socket.write(s), received, close: () => socket.destroy() }
  })
  t.same(seen, [503, 200], 'the first request on a connection accepted behind the standing queue shed; the connection lives on, its next request served')
  t.ok(text.includes('retry-after: 1'), 'Retry-After: the interval rounded up to a second')
  t.ok(shed >= 1, 'counted as a queue-delay shed')
})

t.test('on the wire: new connections on an idle loop are never shed (it waits between them)', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(admission, { rateLimit: false, queueDelay: { targetMs: 1, intervalMs: 20 } })
  app.get('/', async () => 'ok')
  const port = await listen(app)
  const seen: number[] = []
  for (let i = 0; i < 40; i++) {
    const { socket, received } = await rawSocket(port)
    socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n')
    await eventually(() => statuses(received()).length === 1)
    seen.push(...statuses(received()))
    socket.destroy()
  }
  t.same([...new Set(seen)], [200], 'forty connections, one after another: all served')
  t.equal(app.admission.pressure()!.queueDelay!.acceptQueueStanding, false)
})

t.test('over TLS: the mark is on the TLS socket the requests arrive on', async (t) => {
  const tlsDir = new URL('../fixtures/tls/', import.meta.url)
  const cert = readFileSync(new URL('cert.pem', tlsDir))
  const { seen } = await shedThenServed(t, { key: readFileSync(new URL('key.pem', tlsDir)), cert }, async (port) => {
    let data = ''
    const socket = connectTls({ port, host: '127.0.0.1', ca: cert })
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => { data += chunk })
    await new Promise((resolve) => socket.once('secureConnect', resolve))
    return { write: (s) => socket.write(s), received: () => data, close: () => socket.destroy() }
  })
  t.same(seen, [503, 200], 'the first request on the TLS connection shed, the next served')
})

t.test('one request that blocks the loop past the interval sheds the requests read behind it in its turn; a longer interval does not', async (t) => {
  // The answer to "may a single slow request shed a light one at low load?": yes, when it blocks
  // the loop longer than `intervalMs` (measured over HTTP/2, one 150 ms block every 500 ms and a
  // light request every 50 ms: 25 of 247 light requests shed), since every request read after it
  // in that turn waited that long. An application with legitimate blocks sets `intervalMs` above them.
  for (const [intervalMs, shed] of [[100, true], [200, false]] as const) {
    const { probe, at } = probeAt(5, intervalMs)
    at(1000)
    t.equal(probe.sheds(one), false, 'the blocking request opens the turn')
    at(1150)
    t.equal(probe.sheds(socketLike()), shed, `intervalMs ${intervalMs}: a light request read 150 ms later in the same turn is ${shed ? '' : 'not '}shed`)
    await turnEnds()
  }
})
