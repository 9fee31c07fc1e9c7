// How much of lib/ one admitted request runs, counted by V8's precise coverage around one request
// of a warm server (bench/path/count.ts, in a process of its own: the count resets V8's counters,
// which the coverage of this test run must keep). An admitted request enters at most 8 files of
// lib/gate/ (the bound; 15 before the plan became a list), and an opted-out route none of lib/;
// with the live page on, an admitted request runs exactly what it runs with it off.
import t from 'tap'
import { spawn } from 'node:child_process'
import type { PathCount } from '../../bench/path/count.js'

function countPaths (): Promise<PathCount[]> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env }
    delete env.NODE_V8_COVERAGE
    const child = spawn(process.execPath, ['--import', 'tsx', 'bench/path/count.ts', '--json'], { env, stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => { out += chunk })
    child.on('error', reject)
    child.on('close', (code) => { code === 0 ? resolve(JSON.parse(out) as PathCount[]) : reject(new Error(`count.ts exited ${String(code)}`)) })
  })
}

// One count for both tests: it runs in a child process of its own.
let counted: Promise<PathCount[]> | undefined
const paths = (): Promise<PathCount[]> => (counted ??= countPaths())

t.test('an admitted request enters at most 8 files of lib/gate/; an opted-out route, nothing of lib/', async (t) => {
  const counts = await paths()
  const [byKey, byAddress, optedOut] = counts
  for (const admitted of [byKey!, byAddress!]) {
    t.ok(admitted.gateFiles.length <= 8, `${admitted.name}: ${admitted.gateFiles.length} files of lib/gate/ (${admitted.gateFiles.join(', ')})`)
    t.ok(admitted.gateFiles.includes('lib/gate/on-request.ts') && admitted.gateFiles.includes('lib/gate/on-response.ts'), 'the count sees the gate\'s hooks')
    // The top offenders are on by default, and kept on refusals only.
    t.same(admitted.libFiles.filter((file) => file === 'lib/gate/offenders.ts' || file === 'lib/core/heavy-hitters.ts' || file === 'lib/metrics/reasons.ts'), [], 'nothing of the offenders\' sketch or the reasons')
  }
  t.same([optedOut!.libFiles, optedOut!.calls], [[], 0], 'the opted-out route runs no code of lib/')
})

t.test('the live page on: an admitted request runs the same functions of lib/, as often, as with it off', async (t) => {
  const [, byAddress, , live] = await paths()
  t.same([live!.libFiles, live!.functions, live!.calls], [byAddress!.libFiles, byAddress!.functions, byAddress!.calls])
})
