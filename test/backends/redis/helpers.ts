// Shared pieces of the Redis backend tests: a connection to the shared server (or the reason to
// skip), unique key prefixes with cleanup, a call-counting client, and private redis-server
// processes for the tests that fault, flush or reconfigure a server, and a timed HTTP GET for the
// gate-level tests. No tests here.
//
// The shared server is the one REDIS_URL names, when it is set; otherwise a redis-server of the
// test process's own, started on a free port at the first call and killed by its pid when the
// process ends — never whatever happens to answer on 6379. The shared server is never stopped,
// paused, flushed or reconfigured by a test: each writes under its own prefix and deletes its keys
// afterwards. Without REDIS_URL and without a redis-server binary, the Redis tests are skipped,
// with the reason.
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { request as httpRequest, type Agent } from 'node:http'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import type { Kernel, Outcome, Policy } from '../../../lib/core/rates/index.js'
import type { RedisScriptClient } from '../../../lib/backends/redis/redis-backend.js'

/** The server REDIS_URL names, when set (the tests then write into it, under their own prefixes). */
const GIVEN_URL = process.env.REDIS_URL

/** A client for tests: fails fast instead of retrying forever. */
export function testClient (url: string, options: { offlineQueue?: boolean } = {}): Redis {
  return new Redis(url, {
    lazyConnect: true,
    connectTimeout: 1000,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: options.offlineQueue ?? true,
    retryStrategy: (times) => (times > 200 ? null : 50)
  })
}

let own: Promise<{ url: string } | { skip: string }> | undefined

/** This process's own server, started once, stopped (by its pid) when the process ends. */
async function ownServer (): Promise<{ url: string } | { skip: string }> {
  const missing = await redisServerMissing()
  if (missing !== false) return { skip: `REDIS_URL is not set and ${missing}` }
  const server = await startPrivateServer()
  server.admin.disconnect()
  server.unref()
  process.once('exit', server.kill)
  // A signal (tap's timeout) ends the process without 'exit': stop the server, then end as the signal would.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    const stop = (): void => {
      server.kill()
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal)
    }
    process.once(signal, stop)
  }
  return { url: server.url }
}

/**
 * The shared server, connected and answering PING, with its URL (for a child process), or the
 * reason why not (the tests that need it are then reported as skipped with that reason — never
 * passed silently).
 */
export async function sharedRedis (): Promise<{ redis: Redis, url: string } | { skip: string }> {
  const found = GIVEN_URL === undefined ? await (own ??= ownServer()) : { url: GIVEN_URL }
  if ('skip' in found) return found
  const { url } = found
  const redis = new Redis(url, { lazyConnect: true, connectTimeout: 1000, maxRetriesPerRequest: 1, retryStrategy: () => null })
  let cause = ''
  redis.on('error', (error: Error) => { cause = error.message })
  try {
    await redis.connect()
    await redis.ping()
    return { redis, url }
  } catch (error) {
    redis.disconnect()
    return { skip: `no Redis answers at ${url}, which REDIS_URL names (${cause || (error as Error).message}); unset REDIS_URL to let the tests start their own redis-server` }
  }
}

/** A key prefix no other test (or process) uses: letters and digits only, so it is also a SCAN pattern. */
export function uniquePrefix (label: string): string {
  return `test:${process.pid}:${label}:${randomBytes(6).toString('hex')}:`
}

/** Deletes every key under `prefix`; returns how many. */
export async function deleteKeys (redis: Redis, prefix: string): Promise<number> {
  let cursor = '0'
  let deleted = 0
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
    cursor = next
    if (keys.length > 0) deleted += await redis.unlink(...keys)
  } while (cursor !== '0')
  return deleted
}

/** Every key under `prefix`. */
export async function keysUnder (redis: Redis, prefix: string): Promise<string[]> {
  const found: string[] = []
  let cursor = '0'
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
    cursor = next
    found.push(...keys)
  } while (cursor !== '0')
  return found.sort()
}

/** The server's clock in epoch ms, as the script reads it. */
export async function serverNow (redis: Redis): Promise<number> {
  const [seconds, micros] = await redis.time()
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
}

export interface Counted extends RedisScriptClient {
  readonly calls: { evalsha: number, eval: number }
  /** Every call in order: its key and whether the client's promise has settled yet. */
  readonly log: ReadonlyArray<{ readonly method: 'evalsha' | 'eval', readonly key: string, settled: boolean }>
  /** Calls whose promise has not settled: the client is still waiting for the server. */
  pending (key?: string): number
}

/**
 * A client that counts its EVALSHA and EVAL calls (round trips) and passes them on; it also
 * notes when each call's own promise settles, so a test can tell a decision the backend's timer
 * ended (the call still pending) from one the client ended.
 */
export function counting (redis: RedisScriptClient): Counted {
  const calls = { evalsha: 0, eval: 0 }
  const log: Array<{ method: 'evalsha' | 'eval', key: string, settled: boolean }> = []
  const follow = (method: 'evalsha' | 'eval', key: string, call: () => Promise<unknown>): Promise<unknown> => {
    const entry = { method, key, settled: false }
    log.push(entry)
    const settle = (): void => { entry.settled = true }
    const result = call()
    result.then(settle, settle)
    return result
  }
  return {
    calls,
    log,
    pending: (key) => log.filter((entry) => !entry.settled && (key === undefined || entry.key === key)).length,
    evalsha (sha, numKeys, ...rest) {
      calls.evalsha++
      return follow('evalsha', rest[0] as string, () => redis.evalsha(sha, numKeys, ...rest))
    },
    eval (script, numKeys, ...rest) {
      calls.eval++
      return follow('eval', rest[0] as string, () => redis.eval(script, numKeys, ...rest))
    }
  }
}

/** Polls `done` every 10 ms until it holds (a wait for an event, not a bound: tap's timeout ends a hang). */
export async function until (done: () => boolean | Promise<boolean>): Promise<void> {
  while (!(await done())) await sleep(10)
}

/** A free TCP port on the loopback interface. */
export async function freePort (): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  const port = typeof address === 'object' && address !== null ? address.port : 0
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

export interface PrivateServer {
  readonly port: number
  readonly url: string
  readonly pid: number
  /** A client for administration (PAUSE, FLUSH, CLUSTER …), connected. */
  readonly admin: Redis
  /** Kills this server (by its pid) and removes its directory. */
  stop (): Promise<void>
  /** The same, at once (for an `exit` handler): SIGKILL by its pid, the directory removed. */
  kill (): void
  /** Lets this process end while the server runs (then `kill()` it at `exit`). */
  unref (): void
}

/** Whether `redis-server` can be started here; the reason otherwise. */
export async function redisServerMissing (): Promise<string | false> {
  return new Promise((resolve) => {
    const child = spawn('redis-server', ['--version'], { stdio: 'ignore' })
    child.on('error', () => resolve('redis-server is not installed (the Redis tests start their own servers on free ports)'))
    child.on('exit', (code) => resolve(code === 0 ? false : `redis-server --version exited with ${code}`))
  })
}

/**
 * A redis-server of our own on a free port (no persistence), answering PING. `extra` adds
 * arguments, e.g. `['--cluster-enabled', 'yes']`; `port` reuses a port (a restart).
 */
export async function startPrivateServer (extra: string[] = [], port?: number): Promise<PrivateServer> {
  const dir = mkdtempSync(join(tmpdir(), 'admission-redis-'))
  port ??= await freePort()
  const child: ChildProcess = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...extra], { stdio: 'ignore' })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const url = `redis://127.0.0.1:${port}`
  const admin = new Redis(url, { lazyConnect: true, connectTimeout: 500, maxRetriesPerRequest: 0, retryStrategy: () => null })
  admin.on('error', () => { /* retried below */ })
  const running = (): boolean => child.exitCode === null && child.signalCode === null
  const kill = (): void => {
    admin.disconnect()
    if (running()) process.kill(child.pid as number, 'SIGKILL')
    rmSync(dir, { recursive: true, force: true })
  }
  const stop = async (): Promise<void> => {
    const wasRunning = running()
    kill()
    if (wasRunning) await exited
  }
  await answersPing(admin, `redis-server on port ${port}`, stop)
  return { port, url, pid: child.pid as number, admin, stop, kill, unref: () => { child.unref() } }
}

/** One answer of `timedGet`, measured at the client. */
export interface Timed {
  /** `performance.now()` when the request was sent. */
  readonly sentAt: number
  /** From sending the request to the end of its answer, in ms. */
  readonly latencyMs: number
  /** The answer's status, or 0 when the request failed (then `error` says why). */
  readonly status: number
  readonly retryAfter: string | undefined
  readonly headers: Record<string, string | string[] | undefined>
  readonly error?: string
}

/**
 * A GET to the loopback server on `port`, timed at the client; never rejects (a failed request
 * comes back with status 0 and its error). `agent` (e.g. a keep-alive one) is optional.
 */
export function timedGet (port: number, path: string, headers: Record<string, string> = {}, agent?: Agent): Promise<Timed> {
  const sentAt = performance.now()
  return new Promise((resolve) => {
    const failed = (error: Error): void => {
      resolve({ sentAt, latencyMs: performance.now() - sentAt, status: 0, retryAfter: undefined, headers: {}, error: error.message })
    }
    const req = httpRequest({ host: '127.0.0.1', port, path, headers, agent: agent ?? false }, (res) => {
      res.on('error', failed)
      res.resume()
      res.on('end', () => {
        const retryAfter = res.headers['retry-after']
        resolve({ sentAt, latencyMs: performance.now() - sentAt, status: res.statusCode ?? 0, retryAfter: typeof retryAfter === 'string' ? retryAfter : undefined, headers: res.headers })
      })
    })
    req.on('error', failed)
    req.end()
  })
}

/** Runs a command-line tool to its end; its exit code and output. */
export function run (command: string, args: string[]): Promise<{ code: number | null, output: string }> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => { output += chunk.toString() })
    child.stderr.on('data', (chunk: Buffer) => { output += chunk.toString() })
    child.on('error', (error) => resolve({ code: null, output: error.message }))
    child.on('exit', (code) => resolve({ code, output }))
  })
}

/** Connects `admin` and waits until its server answers PING (100 tries, 20 ms apart); else stops the server and throws. */
export async function answersPing (admin: Redis, what: string, stop: () => Promise<void>): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await admin.connect()
      await admin.ping()
      return
    } catch (error) {
      admin.disconnect()
      if (attempt >= 100) {
        await stop()
        throw new Error(`${what} did not answer PING: ${(error as Error).message}`)
      }
      await sleep(20)
    }
  }
}

/** `decide()`, again while it is refused as "too late" (which consumed nothing), up to 20 times. */
export async function resume<T> (decide: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await decide()
    } catch (error) {
      // Too late, or (before any server time is known, a busy machine) the short timeout itself.
      if (attempt >= 20 || !/too late|did not answer within/.test((error as Error).message)) throw error
      await sleep(20)
    }
  }
}

/**
 * Whether the decision script keeps a trusted stored state `stored` as it is after deciding `out`
 * on it (decide-script.ts, `kept`): a refusal, not a charge, that leaves a penalty's block (the
 * state's last two fields) as it was. A kept state is not written; a later decision on it brings
 * it forward as the refusal did.
 */
export function keptByScript (policy: Policy, kernel: Kernel<unknown>, stored: unknown, out: Outcome<unknown>, charge: boolean): boolean {
  if (charge || out.allowed) return false
  if (policy.penalty === undefined) return true
  const before = new Float64Array(kernel.fields)
  const after = new Float64Array(kernel.fields)
  kernel.write(stored, before, 0)
  kernel.write(out.state, after, 0)
  return before.slice(-2).every((n, i) => n === after[after.length - 2 + i])
}
