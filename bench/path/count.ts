// What one admitted request runs of lib/: the files and functions it enters, counted by V8's
// precise coverage (call counts) around one request, after the server is warm. Run from the
// package's folder, on the TypeScript sources:
//
//   node --import tsx bench/path/count.ts            # a table
//   node --import tsx bench/path/count.ts --json     # the numbers (test/gate/admit-path.test.ts)
//
// Each case registers the plugin and one route, sends 200 requests to warm it, resets the counts,
// sends one more and reads them. A function counts when its count rose (a call, or a loop of it);
// `calls` is the sum of those counts in lib/. Inject (light-my-request) sends the requests: what
// runs of lib/ is the same as on a socket.
import { Session } from 'node:inspector/promises'
import { fileURLToPath } from 'node:url'
import { relative } from 'node:path'
import Fastify, { type FastifyInstance } from 'fastify'
import admission from '../../lib/index.js'
import type { AdmissionOptions } from '../../lib/index.js'

const root = fileURLToPath(new URL('../../', import.meta.url))

interface Case {
  readonly name: string
  readonly options: AdmissionOptions
  readonly route: Record<string, unknown>
  /** The status the measured request must get. */
  readonly status: number
}

const CASES: readonly Case[] = [
  { name: 'admitted (rate limit by key function, in-flight limit)', options: { maxInFlight: 100, rateLimit: { limit: 1e9, windowMs: 60_000 }, key: (request) => String(request.headers['x-id']) }, route: {}, status: 200 },
  { name: 'admitted (defaults: rate limit by address)', options: {}, route: {}, status: 200 },
  { name: 'opted out (config.admission: false)', options: {}, route: { config: { admission: false } }, status: 200 },
  { name: 'admitted (defaults, the live page on)', options: { live: true }, route: {}, status: 200 }
]

export interface PathCount {
  readonly name: string
  /** Files of lib/gate/ entered, by path. */
  readonly gateFiles: readonly string[]
  /** Files of lib/ entered. */
  readonly libFiles: readonly string[]
  /** Functions of lib/ entered, and their calls. */
  readonly functions: number
  readonly calls: number
}

async function count (session: Session, one: Case): Promise<PathCount> {
  const app: FastifyInstance = Fastify()
  await app.register(admission, one.options)
  app.get('/', one.route, async () => 'ok')
  await app.ready()
  for (let i = 0; i < 200; i++) await app.inject({ url: '/', headers: { 'x-id': String(i % 10) } })
  await session.post('Profiler.takePreciseCoverage')
  const res = await app.inject({ url: '/', headers: { 'x-id': '3' } })
  const { result } = await session.post('Profiler.takePreciseCoverage')
  await app.close()
  if (res.statusCode !== one.status) throw new Error(`${one.name}: got ${res.statusCode}, expected ${one.status}`)
  const files = new Set<string>()
  let functions = 0
  let calls = 0
  for (const script of result) {
    if (!script.url.startsWith('file://')) continue
    const path = relative(root, fileURLToPath(script.url))
    if (!path.startsWith('lib/')) continue
    for (const fn of script.functions) {
      // The first range is the function's own; its count is how often it was entered.
      const entered = fn.ranges[0]!.count
      // The module's top level (an empty name over the whole file) runs at load, never per request.
      if (entered === 0 || (fn.functionName === '' && fn.ranges[0]!.startOffset === 0)) continue
      files.add(path)
      functions++
      calls += entered
    }
  }
  const libFiles = [...files].sort()
  return { name: one.name, gateFiles: libFiles.filter((file) => file.startsWith('lib/gate/')), libFiles, functions, calls }
}

async function main (): Promise<void> {
  const session = new Session()
  session.connect()
  await session.post('Profiler.enable')
  await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false })
  const counts: PathCount[] = []
  for (const one of CASES) counts.push(await count(session, one))
  session.disconnect()
  if (process.argv.includes('--json')) {
    process.stdout.write(JSON.stringify(counts) + '\n')
    return
  }
  for (const c of counts) {
    console.log(`${c.name}: ${c.gateFiles.length} files of lib/gate/, ${c.libFiles.length} of lib/, ${c.functions} functions, ${c.calls} calls`)
    for (const file of c.libFiles) console.log(`  ${file}`)
  }
}

await main()
