import t from 'tap'
import { spawn } from 'node:child_process'
import { createServer, type Server } from 'node:net'

// `npm start`'s example, as a newcomer runs it: PORT chooses the port, and a port that is taken
// (or a PORT that is not one) is said in one line, with no stack.

interface Run { code: number | null, stdout: string, stderr: string }

/** Starts the example with `env`; `stop` is called on its first output line, then its end is awaited. */
function example (env: Record<string, string>, stop: (line: string, kill: () => void) => void = () => {}): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'example/server.ts'], {
      env: { ...process.env, ...env, _TAPJS_PROCESSINFO_COVERAGE_: '0' },
      stdio: ['ignore', 'pipe', 'pipe']
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => {
      const first = stdout === ''
      stdout += String(chunk)
      if (first) stop(stdout, () => { child.kill('SIGTERM') })
    })
    child.stderr.on('data', (chunk: Buffer) => { stderr += String(chunk) })
    child.on('exit', (code) => { resolve({ code, stdout, stderr }) })
  })
}

async function taken (): Promise<Server & { port: number }> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return Object.assign(server, { port: (server.address() as { port: number }).port })
}

t.test('PORT is honoured; Ctrl-C (SIGTERM) closes it', async (t) => {
  const probe = await taken()
  const port = probe.port
  await new Promise<void>((resolve) => probe.close(() => resolve()))
  const run = await example({ PORT: String(port) }, (_line, kill) => { kill() })
  t.match(run.stdout, `listening on http://127.0.0.1:${port}`)
  t.equal(run.code, 0)
})

t.test('a port that is taken is one line, no stack, exit 1', async (t) => {
  const server = await taken()
  t.teardown(() => server.close())
  const run = await example({ PORT: String(server.port) })
  t.equal(run.code, 1)
  t.equal(run.stderr, `fastify-admission example: port ${server.port} on 127.0.0.1 is taken; choose another with PORT, as in PORT=3001 npm start\n`)
  t.equal(run.stdout, '')
})

t.test('a PORT that is not a port is one line too', async (t) => {
  const run = await example({ PORT: 'http' })
  t.equal(run.code, 1)
  t.equal(run.stderr, 'fastify-admission example: PORT must be a port number from 0 to 65535, got "http"\n')
})
