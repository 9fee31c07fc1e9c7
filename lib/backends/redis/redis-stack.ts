import type { Policy } from '../../core/rates/index.js'
import type { StackLimiter } from '../../rates/backend.js'
import type { PolicyOutcome, StackDecision } from '../../rates/decision.js'
import { RatesStoppedError, RatesUnavailableError } from '../../rates/errors.js'
import { policyFingerprint } from '../../rates/policy.js'
import { DECIDE_STACK_LUA, DECIDE_STACK_SHA } from './decide-stack-script.js'
import type { QuotaBackend } from './quota-backend.js'
import { keyConflict, readStored } from './stored-state.js'

// A stack's registry scripts, as the single limiter's (rare calls: plain EVAL), on all its keys
// at once. Reading: every key's value (nil for a missing one). Deleting: only when every present
// key holds its own policy's fingerprint (ARGV[i] for KEYS[i]), else nothing, and the first
// other fingerprint is answered {i, fingerprint}; else how many keys were deleted.
const READ_STACK_LUA = `local values = {}
for i = 1, #KEYS do values[i] = redis.call('GET', KEYS[i]) end
return values`
const DELETE_STACK_LUA = `local present = {}
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if v then
    local f = string.match(v, '^(%S+)')
    if f ~= ARGV[i] then return { i, f or '' } end
    present[#present + 1] = KEYS[i]
  end
end
if #present > 0 then redis.call('DEL', unpack(present)) end
return #present`

/**
 * Several policies on one quota in Redis, decided as one: one `EVALSHA` of the stack script
 * (`decide-stack-script.ts`) on one key per policy, which decides every policy on its stored state
 * and then stores all the new states or none — atomically, with the single decision's timeout,
 * deadline, NOSCRIPT fallback and failure rules (`RedisBackend.runScript`).
 *
 * Keys: policy i's is `<prefix>{<address>:<identity>}/<i>`. The suffix comes after the hash tag,
 * so every key of one identity's stack hashes to one slot, as Redis Cluster requires of a
 * script's keys — also when the identity contains `}` (the tag then ends early, at the same place
 * in every key). Different identities still spread over every shard. A stack's keys never meet a
 * single limiter's, which end with the brace.
 *
 * No deny cache: a stack's denial is the stack's (the policy that refused, with the others'
 * states unconsumed), which the single limiter's cache does not model; every decision is a round
 * trip.
 */
export class RedisBackendStack implements StackLimiter {
  readonly policies: readonly Readonly<Policy>[]
  readonly address: string
  private readonly backend: QuotaBackend
  private readonly fingerprints: readonly string[]
  private readonly keyStart: string

  constructor (backend: QuotaBackend, address: string, policies: readonly Readonly<Policy>[]) {
    this.backend = backend
    this.address = address
    this.policies = policies
    this.fingerprints = policies.map(policyFingerprint)
    this.keyStart = `${backend.prefix}{${address}:`
  }

  /** The Redis keys of an identity's states, one per policy, in the stack's order. */
  keysOf (identity: string): string[] {
    const start = this.keyStart + identity + '}/'
    return this.policies.map((_, i) => start + String(i))
  }

  consume (identity: string, cost: number): Promise<StackDecision> {
    return this.decide(identity, cost, '0')
  }

  /**
   * Decides as `consume` and stores nothing: the keys are left as they are, but for a missing TTL
   * and a value the script does not trust, which it replaces with the worst state it decided it
   * as (as every call of either script does; that state refuses every cost, so it takes nothing).
   */
  check (identity: string, cost: number): Promise<StackDecision> {
    return this.decide(identity, cost, '1')
  }

  /**
   * Charges `units` to every policy in one script call (mode '2'), or to none on a conflict; units
   * returned are refused by the script from the server's time `returnBy` on (its deadline).
   */
  charge (identity: string, units: number, returnBy = Infinity): Promise<StackDecision> {
    return this.decide(identity, units, '2', units < 0 ? returnBy : Infinity)
  }

  /** The server's time now as its last reply gave it (never ahead of it); undefined before any reply. */
  now (): number | undefined {
    return this.backend.serverNow()
  }

  private async decide (identity: string, amount: number, mode: '0' | '1' | '2', latest = Infinity): Promise<StackDecision> {
    const backend = this.backend
    if (backend.isStopped) throw new RatesStoppedError(this.address)
    const sent = backend.now()
    const keys = this.keysOf(identity)
    const reply = await backend.runScript(DECIDE_STACK_SHA, DECIDE_STACK_LUA, keys, backend.timed([String(amount), mode, ...this.fingerprints], sent, latest))
    const received = backend.now()
    const n = this.policies.length
    if (isStackReply(reply, n)) {
      backend.observe(reply[2], received)
      return stackDecision(reply, n)
    }
    if (Array.isArray(reply) && reply.length === 3 && reply[0] === 1 && typeof reply[1] === 'string' && Number.isInteger(reply[2]) && reply[2] >= 1 && reply[2] <= n) {
      const i = (reply[2] as number) - 1
      keyConflict(this.address, this.policies[i]!, reply[1], keys[i]!)
    }
    if (Array.isArray(reply) && reply.length === 2 && reply[0] === 3 && Number.isSafeInteger(reply[1])) {
      backend.observe(reply[1] as number, received)
      throw new RatesUnavailableError(`too late: Redis ran the stack's decision for ${JSON.stringify(keys[0])} after its deadline (the ${backend.timeoutMs} ms timeout); it consumed nothing`)
    }
    throw new RatesUnavailableError(`unexpected reply from the stack script for ${JSON.stringify(keys[0])}: ${JSON.stringify(reply)}`)
  }

  /** Each policy's stored state (undefined where there is none); a key of another policy is a conflict. */
  async state (identity: string): Promise<unknown[]> {
    if (this.backend.isStopped) throw new RatesStoppedError(this.address)
    const keys = this.keysOf(identity)
    const values = await this.backend.runOnce(READ_STACK_LUA, keys, [])
    if (!Array.isArray(values) || values.length !== keys.length) {
      throw new RatesUnavailableError(`unexpected reply from the read script for ${JSON.stringify(keys[0])}: ${JSON.stringify(values)}`)
    }
    return values.map((stored: unknown, i) => {
      if (stored === null) return undefined
      const policy = this.policies[i]!
      if (typeof stored === 'string') {
        // As the script reads it, except for the time bounds (no server time here).
        const read = readStored(stored, policy, this.fingerprints[i]!, Infinity)
        if (read.kind === 'conflict') keyConflict(this.address, policy, read.fingerprint, keys[i]!)
        if (read.valid) return read.state
      }
      throw new RatesUnavailableError(`the key ${JSON.stringify(keys[i])} holds a value this backend did not write`)
    })
  }

  /** Deletes the identity's keys, if every one there was written under its policy; true when any was. */
  async delete (identity: string): Promise<boolean> {
    if (this.backend.isStopped) throw new RatesStoppedError(this.address)
    const keys = this.keysOf(identity)
    const reply = await this.backend.runOnce(DELETE_STACK_LUA, keys, [...this.fingerprints])
    if (Number.isInteger(reply) && (reply as number) >= 0 && (reply as number) <= keys.length) return (reply as number) > 0
    if (Array.isArray(reply) && reply.length === 2 && Number.isInteger(reply[0]) && reply[0] >= 1 && reply[0] <= keys.length && typeof reply[1] === 'string') {
      const i = (reply[0] as number) - 1
      keyConflict(this.address, this.policies[i]!, reply[1], keys[i]!)
    }
    throw new RatesUnavailableError(`unexpected reply from the delete script for ${JSON.stringify(keys[0])}: ${JSON.stringify(reply)}`)
  }
}

/** `[0, allowed, now, ...(allowed, remaining, retryAfterMs, resetAt, moreAt) per policy]`, integers. */
type StackReply = [0, 0 | 1, number, ...number[]]

function isStackReply (reply: unknown, n: number): reply is StackReply {
  if (!Array.isArray(reply) || reply.length !== 3 + 5 * n || reply[0] !== 0 || (reply[1] !== 0 && reply[1] !== 1)) return false
  if (!reply.every((value) => Number.isSafeInteger(value))) return false
  // Allowed exactly when every policy had room.
  let all: 0 | 1 = 1
  for (let i = 0; i < n; i++) {
    const allowed = reply[3 + 5 * i]
    if (allowed !== 0 && allowed !== 1) return false
    if (allowed === 0) all = 0
  }
  return reply[1] === all
}

/**
 * The reply as a decision, as the memory stack makes it (`MemoryBackendStack`): allowed when every
 * policy had room; the least remaining, the latest resetAt; when refused, the largest wait among
 * the policies that refused.
 */
function stackDecision (reply: StackReply, n: number): StackDecision {
  const policies: PolicyOutcome[] = []
  let remaining = Number.POSITIVE_INFINITY
  let resetAt = 0
  let retryAfterMs = 0
  for (let i = 0; i < n; i++) {
    const at = 3 + 5 * i
    const outcome: PolicyOutcome = { allowed: reply[at] === 1, remaining: reply[at + 1]!, retryAfterMs: reply[at + 2]!, resetAt: reply[at + 3]!, moreAt: reply[at + 4]! }
    policies.push(outcome)
    if (outcome.remaining < remaining) remaining = outcome.remaining
    if (outcome.resetAt > resetAt) resetAt = outcome.resetAt
    if (!outcome.allowed && outcome.retryAfterMs > retryAfterMs) retryAfterMs = outcome.retryAfterMs
  }
  return reply[1] === 1
    ? { allowed: true, denied: false, remaining, resetAt, policies }
    : { allowed: false, denied: true, remaining, retryAfterMs, resetAt, policies }
}
