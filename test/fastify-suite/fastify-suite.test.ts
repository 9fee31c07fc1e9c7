// Transparent to Fastify: a slice of Fastify's own test suite (published in its npm package) runs
// with fastify-admission registered in every instance it creates (without `await`, limits nothing
// reaches: `register-everywhere.cjs`) and, where anything fails, as it is: the two runs must fail the
// same tests — a test that fails only with the plugin is a place where it changes what Fastify does.
//
// The slice: the files about hooks, routes, replies and the handler, where a plugin that adds hooks
// and follows handlers could show. Regressions it caught: a root `onSend` hook added whether a
// route needed it or not (an invalid payload's error no longer reached the handler's `catch`:
// reply-error.test.js), and `onReady` hooks of the plugin's after the application's (Fastify names
// the last hook in its timeout error: hooks.on-ready.test.js). Left out: the tests of the plugin
// tree (`pluginName`, `printPlugins`, `printRoutes({ includeHooks })`), which list every
// registered plugin and hook by design. Fastify's tests need two of its own dev dependencies, joi
// and proxyquire (ours too): without them hooks.test.js and route.3.test.js do not load.
import t from 'tap'
import { spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)
const fastifyDir = dirname(require.resolve('fastify/package.json'))
const preload = join(dirname(fileURLToPath(import.meta.url)), 'register-everywhere.cjs')

const SLICE = [
  'reply-error', 'hooks.on-ready', 'hooks', 'hooks-async', 'route-hooks', 'route-prefix', 'route-shorthand',
  'route.1', 'route.2', 'route.3', 'route.4', 'route.5', 'route.6', 'route.7', 'route.8',
  'router-options', 'context-config', 'async-await', 'handler-timeout', '404s',
  'internals/reply', 'diagnostics-channel/error-before-handler', 'diagnostics-channel/async-request'
].map((name) => `test/${name}.test.js`)

/**
 * Differences the plugin makes by design, each in docs/decisions.md: an `onRoute` hook registered
 * after the plugin's sees the route's handler wrapped (the plugin follows each handler's work, so
 * that a permit ends when the work does — the release rule), not the function it was declared with.
 */
const BY_DESIGN = ['onRoute hook should preserve handler function in options of shorthand route system configuration']

interface Run {
  tests: number
  failed: string[]
  /** Files that failed as a whole (one that did not load, or exited before its tests ended). */
  files: string[]
}

/** Runs the slice with node's test runner in Fastify's folder; the names of the tests that failed. */
function runSlice (nodeArgs: string[]): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeArgs, '--test', '--test-reporter=tap', '--test-concurrency=2', ...SLICE], { cwd: fastifyDir, env: { ...process.env, NODE_OPTIONS: '' } })
    let out = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => { out += chunk })
    child.stderr.resume()
    child.on('error', reject)
    child.on('close', () => {
      const tests = Number(/^# tests (\d+)$/m.exec(out)?.[1])
      const names = [...out.matchAll(/^ *not ok \d+ - (.*?)(?: # .*)?$/gm)].map((m) => m[1]!)
      resolve({ tests, failed: names.filter((name) => !name.startsWith(fastifyDir)).sort(), files: names.filter((name) => name.startsWith(fastifyDir)) })
    })
  })
}

/**
 * With the plugin first: when nothing fails there — no test, no file —, no test can fail only with
 * it. Otherwise the slice runs again without the plugin, and the two runs must fail the same tests:
 * Fastify's own tests that fail on a given machine (a slow one's timing) are not the plugin's.
 * Running the baseline only then halves what a green run costs (four node processes for a minute).
 */
t.test('a slice of Fastify\'s own suite fails the same tests with the plugin registered in every instance', async (t) => {
  const withPlugin = await runSlice(['--require', preload])
  t.ok(withPlugin.tests > 500, `the slice ran (${withPlugin.tests} tests)`)
  const unexpected = withPlugin.failed.filter((name) => !BY_DESIGN.includes(name))
  t.same(withPlugin.files, [], 'every file of the slice loads and ends with the plugin')
  if (unexpected.length === 0) return
  const without = await runSlice([])
  t.equal(withPlugin.tests, without.tests, 'as many tests with the plugin')
  t.same(unexpected.filter((name) => !without.failed.includes(name)), [], 'no test fails only with the plugin, but those by design')
})
