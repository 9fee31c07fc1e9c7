// The load generator, started under `taskset -c 1`. With an IPC channel it stays up and runs one
// load per LoadSpec message, answering each with a LoadResult message (no process start between
// runs, so runs can be short and close together); otherwise it runs the LoadSpec of its argument
// once: `node --import tsx bench/load.ts '<json LoadSpec>'`, and prints the LoadResult as JSON.
import autocannon, { type Request } from 'autocannon'
import { type CoreTime, coreTimes, timesBetween } from './cpu-noise.js'
import { CLIENT_HEADER } from './variants.js'

export interface LoadSpec {
  port: number
  seconds: number
  connections: number
  pipelining: number
  /** Distinct client identities, split among the connections (0: every request says `one`). */
  keys: number
}

export interface LoadResult {
  /** Responses per second over the run, from the clients' start to the end of the load. */
  rps: number
  total: number
  seconds: number
  statusCodes: Record<string, number>
  errors: number
  timeouts: number
  latencyP50: number
  latencyP99: number
  /** Seconds from the clients' start to the end of the load. */
  runSeconds: number
  /** CPU time of this process over `runSeconds` (1 = one core busy). */
  cpu: number
  /** Each core's time over `runSeconds` (Linux only). */
  cores: CoreTime[] | undefined
}

const identity = (i: number): string => `10.${(i >>> 16) & 255}.${(i >>> 8) & 255}.${i & 255}`
const get = (client: string): Request => ({ method: 'GET', path: '/', headers: { [CLIENT_HEADER]: client } })

/**
 * The identities of connection `c`: its own share of the pool, prebuilt once, in shuffled order;
 * the connection cycles through them. Prebuilt requests keep the load generator's cost per request
 * low (a per-request `setupRequest` made autocannon, not the server, the bottleneck on this
 * machine), and one share per connection keeps the set-up small (autocannon deep-copies the
 * shared `requests` for every connection).
 */
function share (c: number, perConnection: number): Request[] {
  const ids = Array.from({ length: perConnection }, (_, i) => c * perConnection + i)
  let x = 0x2545f491 ^ c
  for (let i = ids.length - 1; i > 0; i--) {
    x ^= x << 13; x ^= x >>> 17; x ^= x << 5
    const j = (x >>> 0) % (i + 1)
    const t = ids[i]!; ids[i] = ids[j]!; ids[j] = t
  }
  return ids.map((i) => get(identity(i)))
}

export async function runLoad (spec: LoadSpec): Promise<LoadResult> {
  if (spec.keys > 0 && spec.pipelining !== 1) throw new Error('distinct keys per request need pipelining 1 (autocannon: setRequests)')
  const perConnection = Math.ceil(spec.keys / spec.connections)
  let connection = 0
  let cpu0 = process.cpuUsage()
  let t0 = performance.now()
  let cores0 = coreTimes()
  const instance = autocannon({
    url: `http://127.0.0.1:${spec.port}/`,
    connections: spec.connections,
    pipelining: spec.pipelining,
    duration: spec.seconds,
    timeout: 10,
    requests: [get('one')],
    ...(spec.keys > 0 ? { setupClient: (client) => { client.setRequests(share(connection++, perConnection)) } } : {})
  })
  instance.once('start', () => { cpu0 = process.cpuUsage(); t0 = performance.now(); cores0 = coreTimes() })
  const result = await instance
  const cpu = process.cpuUsage(cpu0)
  const cores = timesBetween(cores0, coreTimes())
  const runSeconds = (performance.now() - t0) / 1000
  const statusCodes: Record<string, number> = {}
  for (const [code, stat] of Object.entries(result.statusCodeStats)) statusCodes[code] = stat.count
  return {
    // Responses over the whole run (autocannon's per-second mean has only a sample or two in a short run).
    rps: result.requests.total / runSeconds,
    total: result.requests.total,
    seconds: result.duration,
    statusCodes,
    errors: result.errors,
    timeouts: result.timeouts,
    latencyP50: result.latency.p50,
    latencyP99: result.latency.p99,
    runSeconds,
    cpu: (cpu.user + cpu.system) / 1e6 / runSeconds,
    cores
  }
}

if (process.send !== undefined) {
  process.on('message', (spec: LoadSpec) => {
    runLoad(spec).then((result) => process.send!({ result }), (error: unknown) => process.send!({ error: String(error) }))
  })
  process.on('disconnect', () => { process.exit(0) })
} else {
  process.stdout.write(JSON.stringify(await runLoad(JSON.parse(process.argv[2] ?? '{}') as LoadSpec)) + '\n')
}
