// Transparent to Fastify: a slice of Fastify's own test suite (published in its npm package) runs
// twice, as it is and with fastify-admission registered in every instance it creates (without
// `await`, limits nothing reaches: `register-everywhere.cjs`), and the two runs must fail the same
// tests — a test that fails only with the plugin is a place where it changes what Fastify does.
//
// The slice: the files about hooks, routes, replies and the handler, where a plugin that adds hooks
// and follows handlers could show. Regressions it caught: a root `onSend` hook added whether a
// route needed it or not (an invalid payload's error no longer reached the handler's `catch`:
// reply-error.test.js), and `onReady` hooks of the plugin's after the application's (Fastify names
// the last hook in its timeout error: hooks.on-ready.test.js). Left out: the tests of the plugin
// tree (`pluginName`, `printPlugins`, `printRoutes({ includeHooks })`), which list every
// registered plugin and hook by design.
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

interface Run { tests: number, failed: string[] }

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
      const failed = [...out.matchAll(/^ *not ok \d+ - (.*?)(?: # .*)?$/gm)].map((m) => m[1]!).filter((name) => !name.startsWith(fastifyDir)).sort()
      resolve({ tests, failed })
    })
  })
}

t.test('a slice of Fastify\'s own suite fails the same tests with the plugin registered in every instance', async (t) => {
  const [without, withPlugin] = await Promise.all([runSlice([]), runSlice(['--require', preload])])
  t.ok(without.tests > 300, `the slice ran (${without.tests} tests)`)
  t.equal(withPlugin.tests, without.tests, 'as many tests with the plugin')
  t.same(withPlugin.failed.filter((name) => !without.failed.includes(name)), [], 'no test fails only with the plugin')
})
