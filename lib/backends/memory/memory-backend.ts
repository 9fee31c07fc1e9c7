import { kernelFor, type Policy } from '../../core/rates/index.js'
import { MemoryLimiter } from './memory-limiter.js'
import { ADMITTED, UNDECIDABLE, type BackendLimiter, type RatesBackend, type SynchronousDecisions, type Verdict } from '../../rates/backend.js'
import { epochMs } from '../../rates/clock.js'
import { allowedDecision, deniedDecision, type RateDecision } from '../../rates/decision.js'
import { RatesInvalidArgumentError, RatesStoppedError, RatesUnavailableError } from '../../rates/errors.js'
import { isStack, QuotaMap } from '../../rates/limiter-map.js'
import { MemoryBackendStack } from './memory-stack.js'
import { exactObject, optionalFunction, positiveInteger } from '../../validation/checks.js'

export interface MemoryBackendOptions {
  /**
   * Identities tracked at once per limiter. Unset: the environment variable
   * `RATES_MAX_IDENTITIES` when it is set, else 1 000 000.
   */
  maxIdentities?: number
  /** Epoch milliseconds; for tests and simulations. Default: a monotonic clock. */
  clock?: () => number
}

export const DEFAULT_MAX_IDENTITIES = 1_000_000
const MEMORY_OPTIONS = { keys: ['maxIdentities', 'clock'], expected: 'an object { maxIdentities?, clock? }', options: true }
export const MAX_IDENTITIES_VARIABLE = 'RATES_MAX_IDENTITIES'

/**
 * Quotas in this process's memory: one `MemoryLimiter` (a `Map` from the encoded identity to a
 * row of a typed array) per limiter. A restart forgets them; live state is never evicted: at the
 * bound, a new identity is refused with `RATES_UNAVAILABLE` and the wait until a state recovers.
 */
export class MemoryBackend implements RatesBackend {
  readonly kind = 'memory'
  readonly maxIdentities: number
  readonly clock: () => number
  private readonly quotas = new QuotaMap<MemoryBackendLimiter, MemoryBackendStack>()
  private stopped = false

  constructor (options: MemoryBackendOptions = {}) {
    const input = exactObject(RatesInvalidArgumentError.complain, 'options', options, MEMORY_OPTIONS)
    this.maxIdentities = maxIdentitiesFrom(input.maxIdentities)
    this.clock = optionalFunction<() => number>(RatesInvalidArgumentError.complain, 'options.clock', input.clock, 'a function returning epoch milliseconds') ?? epochMs
  }

  get isStopped (): boolean {
    return this.stopped
  }

  limiter (address: string, policy: Readonly<Policy>): MemoryBackendLimiter {
    if (this.stopped) throw new RatesStoppedError(address)
    return this.quotas.limiter(address, policy, () => new MemoryBackendLimiter(this, address, policy))
  }

  stack (address: string, policies: readonly Readonly<Policy>[]): MemoryBackendStack {
    if (this.stopped) throw new RatesStoppedError(address)
    return this.quotas.stack(address, policies, () => new MemoryBackendStack(this, address, policies))
  }

  /**
   * States held, over all limiters (a stack counts each of its policies'): live ones and recovered
   * ones not yet dropped. Counting only live ones would take a pass over every state (each one's
   * recovery depends on the time); the held ones are what the memory grows with, and are dropped
   * when the room is needed.
   */
  get identities (): number {
    let total = 0
    for (const quota of this.quotas.values()) total += isStack(quota) ? quota.identities : quota.store.table.size
    return total
  }

  async stop (): Promise<void> {
    this.stopped = true
    this.quotas.clear()
  }
}

/**
 * One limiter in memory. It decides synchronously too (`synchronous`, itself): the HTTP gate's
 * hot path reads the decision's details from its fields, with no promise and no allocation.
 */
export class MemoryBackendLimiter implements BackendLimiter, SynchronousDecisions {
  readonly policy: Readonly<Policy>
  readonly store: MemoryLimiter
  readonly synchronous: SynchronousDecisions = this
  decidedAt = 0
  private readonly backend: MemoryBackend
  private readonly address: string

  constructor (backend: MemoryBackend, address: string, policy: Readonly<Policy>) {
    this.backend = backend
    this.address = address
    this.policy = policy
    this.store = new MemoryLimiter(kernelFor(policy), policy, backend.maxIdentities)
  }

  get remaining (): number { return this.store.remaining }
  get retryAfterMs (): number { return this.store.retryAfterMs }
  get resetAt (): number { return this.store.resetAt }
  get moreAt (): number { return this.store.moreAt }

  decide (identity: string, cost: number): Verdict {
    const now = this.backend.clock()
    this.decidedAt = now
    return this.store.consume(identity, now, cost)
  }

  async consume (identity: string, cost: number): Promise<RateDecision> {
    if (this.backend.isStopped) throw new RatesStoppedError(this.address)
    return this.decision(this.decide(identity, cost))
  }

  async charge (identity: string, units: number, returnBy = Infinity): Promise<RateDecision> {
    if (this.backend.isStopped) throw new RatesStoppedError(this.address)
    const now = this.backend.clock()
    this.decidedAt = now
    // Units returned past their window are not taken: what the quota holds is answered as it stands.
    return this.decision(this.store.charge(identity, now, units < 0 && now >= returnBy ? 0 : units))
  }

  now (): number {
    return this.backend.clock()
  }

  private decision (verdict: Verdict): RateDecision {
    const store = this.store
    if (verdict === ADMITTED) return allowedDecision(store.remaining, store.resetAt, store.moreAt)
    if (verdict === UNDECIDABLE) {
      throw new RatesUnavailableError(`the memory backend tracks ${this.backend.maxIdentities} identities for this limiter, all with live state`, { retryAfterMs: store.retryAfterMs })
    }
    return deniedDecision(store.remaining, store.retryAfterMs, store.resetAt, store.moreAt)
  }

  async state (identity: string): Promise<unknown> {
    if (this.backend.isStopped) throw new RatesStoppedError(this.address)
    return this.store.peek(identity)
  }

  async delete (identity: string): Promise<boolean> {
    if (this.backend.isStopped) throw new RatesStoppedError(this.address)
    return this.store.table.remove(identity)
  }
}

function maxIdentitiesFrom (value: unknown): number {
  if (value !== undefined) return positiveInteger(RatesInvalidArgumentError.complain, 'options.maxIdentities', value)
  const fromEnvironment = process.env[MAX_IDENTITIES_VARIABLE]
  if (fromEnvironment === undefined) return DEFAULT_MAX_IDENTITIES
  const parsed = /^[1-9][0-9]*$/.test(fromEnvironment) ? Number(fromEnvironment) : Number.NaN
  if (!Number.isSafeInteger(parsed)) {
    throw new RatesInvalidArgumentError(MAX_IDENTITIES_VARIABLE, 'a positive integer in decimal digits (the environment variable)', fromEnvironment)
  }
  return parsed
}

/** The embedded default backend: quotas in this process's memory. */
export function memoryBackend (options: MemoryBackendOptions = {}): MemoryBackend {
  return new MemoryBackend(options)
}
