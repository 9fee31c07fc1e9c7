// Redis's cost per decision, without HTTP: `node --import tsx bench/redis/decisions.ts '<json
// DecisionSpec>'`, started by run.ts pinned to the app core, against the private redis-server of
// the run. Every round runs every cell (the order reversed on even rounds), each cell on a flushed
// server, a new client and new keys; Redis's counters are read just before and after the measured
// decisions. Prints one JSON line: DecisionResult.
import { Redis } from 'ioredis'
import { allCells, type Cell, cellName, contender, type Contender } from './contenders.js'
import { countersBetween, readCounters, type RedisCounters } from './redis-info.js'

export interface DecisionSpec {
  url: string
  rounds: number
  /** Measured decisions per cell and round. */
  decisions: number
  /** Decisions before the measured ones (JIT, connection), not counted. */
  warmup: number
  /** Decisions in flight at once (a closed loop): the HTTP bench's connections. */
  concurrency: number
  /** Admitting draws its keys at random from this many. */
  keySpace: number
}

export interface CellRun {
  round: number
  cell: Cell
  name: string
  decisions: number
  seconds: number
  /** CPU of this process (the client side) over the decisions, in seconds. */
  clientCpuSeconds: number
  /** Redis's counters over the decisions. */
  redis: RedisCounters
}

export interface DecisionResult {
  spec: DecisionSpec
  /** Redis's own CPU while idle (serverCron), seconds of CPU per second: the floor of every window. */
  idleCpuPerSecond: number
  runs: CellRun[]
}

/** Random IPv4-like keys over `space` values (xorshift32: cheap, the same sequence every run). */
function randomKeys (space: number, seed: number): () => string {
  let x = seed | 1
  return () => {
    x ^= x << 13; x ^= x >>> 17; x ^= x << 5
    const i = (x >>> 0) % space
    return `10.${(i >>> 16) & 255}.${(i >>> 8) & 255}.${i & 255}`
  }
}

const HOT_KEY = 'one'

/** `n` decisions, `concurrency` at a time; throws if any is not `expected` (allowed or not). */
async function decideMany (c: Contender, key: () => string, n: number, concurrency: number, expected: boolean): Promise<void> {
  let issued = 0
  let wrong = 0
  const worker = async (): Promise<void> => {
    while (issued < n) {
      issued++
      if ((await c.decide(key())) !== expected) wrong++
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  if (wrong > 0) throw new Error(`${wrong} of ${n} decisions were not ${expected ? 'allowed' : 'denied'}`)
}

async function runCell (admin: Redis, spec: DecisionSpec, cell: Cell, round: number, index: number): Promise<CellRun> {
  // A private server: flushing it leaves every cell the same empty keyspace (no rehash or expiry
  // left over from the cell before).
  await admin.flushall()
  const c = contender(cell, spec.url, `bench:${round}:${index}:`)
  await c.client.ping()
  const refusing = cell.mode === 'refuse'
  const key = cell.mode === 'admit' ? randomKeys(spec.keySpace, 0x9e3779b9 ^ (round * 131 + index)) : () => HOT_KEY
  if (refusing) {
    // Spend the hot key's one unit; the first denial also fills the deny cache when it is on.
    if (!(await c.decide(HOT_KEY))) throw new Error(`${cellName(cell)}: the first decision was not allowed`)
    if (await c.decide(HOT_KEY)) throw new Error(`${cellName(cell)}: the second decision was allowed`)
  }
  await decideMany(c, key, spec.warmup, spec.concurrency, !refusing)
  const before = await readCounters(admin)
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  await decideMany(c, key, spec.decisions, spec.concurrency, !refusing)
  const seconds = (performance.now() - t0) / 1000
  const cpu = process.cpuUsage(cpu0)
  const redis = countersBetween(before, await readCounters(admin))
  await c.stop()
  await c.client.quit()
  return { round, cell, name: cellName(cell), decisions: spec.decisions, seconds, clientCpuSeconds: (cpu.user + cpu.system) / 1e6, redis }
}

const spec = JSON.parse(process.argv[2] ?? '{}') as DecisionSpec
const admin = new Redis(spec.url)
const idle0 = await readCounters(admin)
await new Promise((resolve) => setTimeout(resolve, 1000))
const idleCpuPerSecond = countersBetween(idle0, await readCounters(admin)).cpuSeconds
const runs: CellRun[] = []
const cells = allCells()
for (let round = 1; round <= spec.rounds; round++) {
  const order = round % 2 === 1 ? cells : [...cells].reverse()
  for (const cell of order) {
    const run = await runCell(admin, spec, cell, round, cells.indexOf(cell))
    process.stderr.write(`decisions round ${round}/${spec.rounds} ${run.name}: ${Math.round(run.decisions / run.seconds)} decisions/s\n`)
    runs.push(run)
  }
}
await admin.flushall()
admin.disconnect()
const result: DecisionResult = { spec, idleCpuPerSecond, runs }
process.stdout.write(JSON.stringify(result) + '\n')
