// A server whose application callbacks all throw or reject, on a backend that decides by promise,
// in a process of its own run with --unhandled-rejections=strict and no error handler at all (tap
// installs its own in a test's process): refused clients get their 429, and the process lives on.
import { spawn } from 'node:child_process'
import t from 'tap'
import { get } from '../helpers/http.js'

t.test('refusing, with every callback failing, ends neither the request nor the process', async (t) => {
  const child = spawn(process.execPath, [...process.execArgv, '--unhandled-rejections=strict', 'test/helpers/strict-child.ts'], {
    // No coverage from the child (see test/backends/redis/children.ts).
    env: { ...process.env, _TAPJS_PROCESSINFO_COVERAGE_: '0' },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc']
  })
  let output = ''
  child.stdout!.on('data', (chunk: Buffer) => { output += chunk.toString() })
  child.stderr!.on('data', (chunk: Buffer) => { output += chunk.toString() })
  const exited = new Promise<number | string>((resolve) => { child.once('exit', (code, signal) => { resolve(code ?? signal ?? 'unknown') }) })
  t.teardown(() => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL') })
  const ready = await Promise.race([
    new Promise<{ port: number, handlers: number }>((resolve) => { child.once('message', resolve as (message: unknown) => void) }),
    exited.then((code) => { throw new Error(`the child exited (${code}) before listening: ${output}`) })
  ])
  t.equal(ready.handlers, 0, 'the child has no handler for unhandled rejections or uncaught exceptions')
  const statuses: number[] = []
  for (let i = 0; i < 4; i++) statuses.push((await get(ready.port, '/')).status)
  t.same(statuses, [200, 429, 429, 429])
  // A rejection left behind by a request would have ended the process before the next one.
  t.equal(child.exitCode, null, `still running: ${output}`)
  child.send('close')
  t.equal(await exited, 0, `and it closes cleanly: ${output}`)
})
