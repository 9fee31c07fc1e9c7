// A Redis client for tests that decides as the decision script does, on the TypeScript kernels,
// in this process: one shared "server" for several backends (processes), no Redis needed. The
// script itself is held to the kernels by the differential tests; this stands for it where a test
// is about what the backend does around its calls (leases), not about Lua.
import { kernelFor, type Kernel, type Policy } from '../../../lib/core/rates/index.js'
import type { RedisScriptClient } from '../../../lib/backends/redis/redis-backend.js'
import { policyOfFingerprint } from '../../../lib/rates/policy.js'

export interface KernelServer {
  /** A client of this server (each backend gets its own). */
  client (): RedisScriptClient & { readonly calls: number }
  /** Script calls received, over every client. */
  readonly calls: number
  /** Refusals given (a cost that did not pass). */
  readonly refusals: number
  /** The state stored at `key`, or undefined. */
  state (key: string): unknown
  /** The amounts sent, in order ("3", "c-2" …), with the key. */
  readonly log: Array<{ key: string, amount: string, now: number }>
}

/** A server whose clock is the test time each call carries (`testingRedisBackend`), else Date.now(). */
export function kernelServer (): KernelServer {
  const states = new Map<string, unknown>()
  const log: Array<{ key: string, amount: string, now: number }> = []
  let calls = 0
  let refusals = 0
  const decide = (key: string, fingerprint: string, amount: string, time: string | undefined, deadline: string | undefined): unknown => {
    const policy = policyOfFingerprint(fingerprint) as Policy
    const kernel = kernelFor(policy)
    // A backend in production sends no time (''): the server's clock then, as TIME would be.
    const now = time === undefined || time === '' ? Date.now() : Number(time)
    if (deadline !== undefined && now >= Number(deadline)) return [3, now]
    log.push({ key, amount, now })
    const state = states.get(key) ?? kernel.fresh(policy, now)
    const charge = /^c(-?\d+)$/.exec(amount)
    const outcome = charge === null ? kernel.consume(state, policy, now, Number(amount)) : kernel.charge(state, policy, now, Number(charge[1]))
    if (outcome.allowed || charge !== null) states.set(key, outcome.state)
    if (!outcome.allowed && charge === null) refusals++
    const head = [0, outcome.allowed ? 1 : 0, outcome.remaining, outcome.retryAfterMs, outcome.resetAt, now, outcome.moreAt]
    return outcome.allowed ? head : [...head, ...row(kernel, outcome.state)]
  }
  const server = {
    get calls () { return calls },
    get refusals () { return refusals },
    log,
    state: (key: string) => states.get(key),
    client () {
      let own = 0
      const answer = async (rest: Array<string | number>): Promise<unknown> => {
        calls++
        own++
        const [key, fingerprint, amount, time, deadline] = rest.map(String)
        return decide(key as string, fingerprint as string, amount as string, time, deadline)
      }
      return {
        get calls () { return own },
        evalsha: async (_sha: string, _keys: number, ...rest: Array<string | number>) => answer(rest),
        eval: async (_script: string, _keys: number, ...rest: Array<string | number>) => answer(rest)
      }
    }
  }
  return server
}

function row (kernel: Kernel<unknown>, state: unknown): number[] {
  const numbers = new Float64Array(kernel.fields)
  kernel.write(state, numbers, 0)
  return [...numbers]
}
