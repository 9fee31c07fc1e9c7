// Leases against real servers (a single node in leases-server.test.ts, a 3-master cluster in
// cluster.test.ts): several backends, each its own client (processes, as far as Redis can tell),
// on one hot identity.
import type { Test } from 'tap'
import { redisBackend } from '../../../lib/index.js'
import type { RedisBackendClient } from '../../../lib/backends/redis/redis-backend.js'
import { normalizePolicy } from '../../../lib/rates/policy.js'
import { windowAround } from './children.js'

export interface LeaseServer {
  /** The server's clock (epoch ms). */
  now (): Promise<number>
  /** The stored value at `key`. */
  get (key: string): Promise<string | null>
  /** Script calls (EVALSHA and EVAL) the server has run so far, over every node. */
  scriptCalls (): Promise<number>
}

/** `requests` consumes on one identity, `inFlight` at a time; how many were admitted. */
async function hammer (consume: () => Promise<{ allowed: boolean }>, requests: number, inFlight: number): Promise<number> {
  let left = requests
  let admitted = 0
  await Promise.all(Array.from({ length: inFlight }, async () => {
    while (left > 0) {
      left--
      if ((await consume()).allowed) admitted++
    }
  }))
  return admitted
}

/**
 * A limited hot key: never more than the limit in its window, and once every backend stopped
 * (giving back what its leases held) the window's stored count is exactly what was admitted.
 * Then an unlimited one: over ten times fewer script calls than decisions.
 */
export async function leasesOnRealServers (t: Test, clients: Array<{ name: string, client: RedisBackendClient }>, server: LeaseServer, prefix: string): Promise<void> {
  const limit = 400
  const windowMs = windowAround(await server.now(), 30_000)
  const policy = normalizePolicy({ algorithm: 'fixed-window', limit, windowMs })
  const leases = { maxUnits: 32, holdMs: 200 }
  const limited = clients.map(({ client }) => redisBackend({ client, prefix, timeoutMs: 5000, denyCache: false, leases }))
  const limiters = limited.map((backend) => backend.limiter('app#hot', policy))
  const perClient = await Promise.all(limiters.map(async (limiter) => hammer(async () => limiter.consume('crawler', 1), 300, 16)))
  const admitted = perClient.reduce((a, b) => a + b, 0)
  t.ok(admitted <= limit, `${admitted} admitted of ${300 * clients.length} asked (${perClient.join(' + ')} by ${clients.map(({ name }) => name).join(', ')}), limit ${limit}`)
  await Promise.all(limited.map(async (backend) => backend.stop()))
  const stored = await server.get(limiters[0]!.keyOf('crawler'))
  t.equal(Number(stored?.split(' ')[2]), admitted, 'after every lease went back, the window counts exactly what was admitted')

  const hot = clients.map(({ client }) => redisBackend({ client, prefix, timeoutMs: 5000, leases }))
  const unlimited = normalizePolicy({ algorithm: 'token-bucket', limit: 1_000_000, windowMs: 60_000 })
  const before = await server.scriptCalls()
  const decided = await Promise.all(hot.map(async (backend) => {
    const limiter = backend.limiter('app#hot-unlimited', unlimited)
    return hammer(async () => limiter.consume('tenant', 1), 1000, 16)
  }))
  const calls = await server.scriptCalls() - before
  const decisions = 1000 * clients.length
  t.equal(decided.reduce((a, b) => a + b, 0), decisions, 'every decision admitted')
  t.ok(calls * 10 <= decisions, `${calls} script calls for ${decisions} decisions`)
  await Promise.all(hot.map(async (backend) => backend.stop()))
}
