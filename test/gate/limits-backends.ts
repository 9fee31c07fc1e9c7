// The backends the stacked-policy, tier and login-throttling tests run on: memory, and the shared
// Redis (with a test clock, under a unique prefix per test, keys deleted afterwards) when one
// answers — otherwise its tests are skipped with the reason. No tests here.
import type { Test } from 'tap'
import { memoryBackend, type RatesBackend } from '../../lib/index.js'
import { testingRedisBackend } from '../../lib/backends/redis/redis-backend.js'
import { deleteKeys, sharedRedis, uniquePrefix } from '../backends/redis/helpers.js'

export interface TestBackend {
  readonly name: string
  /** The reason its tests are skipped, or false. */
  readonly skip: string | false
  /** A new backend whose clock is `clock`. */
  make (t: Test, clock: () => number): RatesBackend
}

/** Memory, and Redis (skipped with the reason when none answers); the connection ends with `root`. */
export async function limitBackends (root: Test): Promise<TestBackend[]> {
  const shared = await sharedRedis()
  if (!('skip' in shared)) root.teardown(() => { shared.redis.disconnect() })
  return [
    { name: 'memory', skip: false, make: (_t, clock) => memoryBackend({ clock }) },
    {
      name: 'redis',
      skip: 'skip' in shared ? shared.skip : false,
      make: (t, clock) => {
        if ('skip' in shared) throw new Error(shared.skip)
        const prefix = uniquePrefix('limits')
        t.teardown(async () => { await deleteKeys(shared.redis, prefix) })
        // The gate reports a remote decision's `t=` from the host's clock (Date.now()), and the
        // script decides at the test clock: for the test, the host's clock is the test clock.
        const hostClock = Date.now
        Date.now = clock
        t.teardown(() => { Date.now = hostClock })
        return testingRedisBackend({ client: shared.redis, prefix, timeoutMs: 1000 }, { now: clock })
      }
    }
  ]
}

/** A clock the test moves by hand. */
export function manualClock (start = 1_700_000_040_000): { now: () => number, advance: (ms: number) => void } {
  let at = start
  return { now: () => at, advance: (ms) => { at += ms } }
}

/** A custom backend whose stacks decide by promise only (memory underneath, no synchronous decisions); `down.now` fails its checks. */
export function byPromise (clock: () => number, down: { now: boolean } = { now: false }): RatesBackend {
  const inner = memoryBackend({ clock })
  return {
    kind: 'by-promise',
    limiter: (address, policy) => inner.limiter(address, policy),
    stop: async () => { await inner.stop() },
    stack: (address, policies) => {
      const stack = inner.stack!(address, policies)
      return {
        policies,
        consume: (identity, cost) => stack.consume(identity, cost),
        check: async (identity, cost) => {
          if (down.now) throw new Error('the store is down')
          return stack.check(identity, cost)
        },
        state: (identity) => stack.state(identity),
        delete: (identity) => stack.delete(identity)
      }
    }
  }
}
