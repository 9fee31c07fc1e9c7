// The bench's own redis-server: on a free port (so its counters are the bench's alone), started
// and stopped by its pid (test/backends/redis/helpers.ts), pinned with all its threads to one core.
import { execFileSync } from 'node:child_process'
import { type PrivateServer, startPrivateServer } from '../../test/backends/redis/helpers.js'

export async function startPinnedRedis (core: number): Promise<PrivateServer> {
  const server = await startPrivateServer()
  try {
    // -a: every thread (the main one and the background I/O and lazy-free threads).
    execFileSync('taskset', ['-a', '-p', '-c', String(core), String(server.pid)], { stdio: 'ignore' })
  } catch (error) {
    await server.stop()
    throw error
  }
  return server
}
