// One overload server: `node --import tsx bench/overload/server.ts <variant> <json settings>`,
// started by run.ts under `taskset -c 0` with an IPC channel. It listens on a free loopback port and
// tells the parent which; the parent controls it over IPC only (no HTTP control route, so nothing
// of the control path goes through the variant or the measurement):
//   { slow: factor }  the downstream's operations take `factor` times as long from now on (the step)
//   'stats'           answers { stats } (process CPU, handler counts, pool queue)
// It exits when the parent goes away.
import { performance } from 'node:perf_hooks'
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify'
import { overloadVariant } from './variants.js'
import { DownstreamPool, type ModelName, spin, type WorkSettings } from './work.js'

export interface ServerSettings extends WorkSettings {
  model: ModelName
  goodMaxInFlight: number
}

export interface ServerStats {
  cpu: NodeJS.CpuUsage
  /** Handlers that finished their work. */
  handled: number
  /** ... of which the client had already gone (work done for nobody). */
  wasted: number
  /** Largest downstream queue seen (downstream model). */
  maxQueued: number
  /** With OVERLOAD_TRACE=1: the gate every 200 ms. */
  trace: TracePoint[]
}

/** The gate at one instant: s since the server started, its limit (NaN: none), in flight, the counters so far (sheds by the pressure signal that made them), and since the last point the connections accepted and the loop's utilization. */
export interface TracePoint { t: number, limit: number, inFlight: number, shed: number, admitted: number, byReason: Record<string, number>, accepts: number, elu: number }

const [name = '', json = '{}'] = process.argv.slice(2)
const settings = JSON.parse(json) as ServerSettings
const pool = new DownstreamPool(settings.poolSize, settings.opMs)
let handled = 0
let wasted = 0
const trace: TracePoint[] = []

const app = Fastify({ logger: false })
const variant = overloadVariant(name)
await variant.register(app, { model: settings.model, goodMaxInFlight: settings.goodMaxInFlight })
const handler = settings.model === 'cpu'
  ? (request: FastifyRequest, reply: FastifyReply): void => {
      spin(settings.cpuMs)
      handled++
      if (request.raw.socket.destroyed) wasted++
      reply.send('ok')
    }
  : async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    await pool.run()
    handled++
    if (request.raw.socket.destroyed) wasted++
    return reply.send('ok')
  }
app.get('/', handler)
// The priorities scenario's two streams (variants without this plugin ignore the route config;
// one without its in-flight gate would refuse a priority, so gets none).
const priority = (name: 'sheddable' | 'critical'): object => variant.noInFlightGate === true ? {} : { config: { admission: { priority: name } } }
app.get('/sheddable', priority('sheddable'), handler)
app.get('/critical', priority('critical'), handler)
await app.listen({ host: '127.0.0.1', port: 0 })
const address = app.server.address()
if (address === null || typeof address === 'string') throw new Error('no TCP address')
process.on('message', (message: unknown) => {
  if (message === 'stats') {
    const stats: ServerStats = { cpu: process.cpuUsage(), handled, wasted, maxQueued: pool.maxQueued, trace }
    process.send?.({ stats })
  } else if (typeof message === 'object' && message !== null && 'slow' in message) {
    pool.factor = Number((message as { slow: number }).slow)
    process.send?.({ slowed: pool.factor })
  }
})
process.on('disconnect', () => { process.exit(0) })
process.send?.({ port: address.port })
// OVERLOAD_TRACE=1: the gate's limit, in-flight count and sheds (by reason) on stderr every 200 ms
// (how the adaptive limit and the queue-delay cut move), kept for the stats' `trace` too.
// Beside them, what the queue-delay shedding reads: connections accepted and the loop's utilization
// since the last point (a busy loop accepting in every tick is its "standing accept queue").
if (process.env.OVERLOAD_TRACE === '1') {
  const t0 = performance.now()
  let accepts = 0
  let elu = performance.eventLoopUtilization()
  app.server.on('connection', () => { accepts++ })
  setInterval(() => {
    const s = app.admission?.stats()
    const now = performance.eventLoopUtilization()
    const point: TracePoint = { t: (performance.now() - t0) / 1000, limit: typeof s?.limit === 'number' ? s.limit : Number.NaN, inFlight: s?.inFlight ?? 0, shed: s?.shed ?? 0, admitted: s?.admitted ?? 0, byReason: { ...s?.pressure?.shed }, accepts, elu: performance.eventLoopUtilization(now, elu).utilization }
    accepts = 0
    elu = now
    trace.push(point)
    process.stderr.write(`trace ${point.t.toFixed(2)} limit=${String(s?.limit)} inFlight=${point.inFlight} shed=${point.shed} admitted=${point.admitted} queueDelay=${point.byReason.queueDelay ?? 0} accepts=${point.accepts} elu=${point.elu.toFixed(2)}\n`)
  }, 200).unref()
}
