import { leaseEndsAt, leaseUnits, nextBatch, returnDeadline } from '../../core/rates/lease.js'
import type { Policy } from '../../core/rates/index.js'
import { allowedDecision, type RateDecision } from '../../rates/decision.js'

/** A decision the quota made, with its clock when it made it. */
export interface QuotaAnswer {
  readonly decision: RateDecision
  readonly serverNow: number
}

/** What a lease book needs of the quota it leases from (a Redis limiter). */
export interface LeaseQuota {
  readonly policy: Readonly<Policy>
  /** The local clock, in ms. */
  now (): number
  /** One decision of `cost` at the quota. */
  decide (identity: string, cost: number, sent: number): Promise<QuotaAnswer>
  /** A refusal of `cost` the quota's deny cache is sure of now, or undefined. */
  denied (identity: string, cost: number): RateDecision | undefined
  /** Gives `units` back; the quota refuses it from its time `deadline` on. */
  giveBack (identity: string, units: number, deadline: number, sent: number): Promise<unknown>
}

export interface LeaseSettings {
  /** The largest batch one lease takes. */
  readonly maxUnits: number
  /** How long a lease lasts, at most (ms). */
  readonly holdMs: number
  /** Identities followed at once; beyond it the one followed longest goes (its units given back). */
  readonly maxEntries: number
}

interface Held {
  /** Units left to admit locally. */
  units: number
  /** Local time from which the lease is over. */
  until: number
  /** Local time it was taken. */
  takenAt: number
  /** The quota's time from which nothing can be given back (`returnDeadline`). */
  deadline: number
  /** Units the next lease asks for (`nextBatch`); 1: an ordinary decision. */
  batch: number
  /** What the quota said at the last decision: units left there, full capacity, more units. */
  remaining: number
  resetAt: number
  moreAt: number
  /** The lease being taken, which a request without units waits for. */
  taking: Promise<void> | undefined
}

/**
 * The leases one process holds from one limiter, per identity (rules in `core/rates/lease.ts`).
 * An identity asked once goes to the quota as usual; asked again within half a hold, or while
 * its decision is in flight, it gets a batch, which doubles while leases are spent within half a
 * hold and halves when one ends by time mostly unused; a request with no units left waits for the
 * lease being taken rather than sending its own. A lease ends when it is spent, when `holdMs` is
 * over or, for a window, with its window; a window's unused units go back to the quota (a timer
 * gives back leases no request comes for; `stop()` gives back all). A request the lease cannot cover is
 * decided by the quota, and so is every refusal: its wait is the quota's.
 */
export class LeaseBook {
  private readonly quota: LeaseQuota
  private readonly settings: LeaseSettings
  private readonly held: Map<string, Held>
  /** Give-backs in flight, which `stop()` waits for. */
  private readonly returning: Set<Promise<unknown>>
  private timer: ReturnType<typeof setInterval> | undefined

  constructor (quota: LeaseQuota, settings: LeaseSettings) {
    this.quota = quota
    this.settings = settings
    this.held = new Map()
    this.returning = new Set()
    this.timer = undefined
  }

  async consume (identity: string, cost: number): Promise<RateDecision> {
    for (;;) {
      const entry = this.held.get(identity)
      if (entry?.taking !== undefined) {
        if (entry.batch > 1) {
          await entry.taking
          // The lease it waited for may have ended in a refusal this one shares.
          const denied = this.quota.denied(identity, cost)
          if (denied !== undefined) return denied
          continue
        }
        // Hot before its first lease: decided as usual, and the next take is a lease.
        entry.batch = Math.min(this.settings.maxUnits, 2)
        return (await this.quota.decide(identity, cost, this.quota.now())).decision
      }
      const now = this.quota.now()
      if (entry !== undefined && now < entry.until && entry.units >= cost) {
        entry.units -= cost
        return allowedDecision(entry.units + entry.remaining, entry.resetAt, entry.moreAt)
      }
      return await this.take(identity, entry, cost, now)
    }
  }

  private async take (identity: string, ended: Held | undefined, cost: number, now: number): Promise<RateDecision> {
    const { holdMs, maxUnits } = this.settings
    let batch = 1
    let remaining = 0
    if (ended !== undefined) {
      batch = nextBatch(ended.batch, now < ended.until, now - ended.takenAt, ended.units, holdMs, maxUnits)
      remaining = ended.remaining
      this.giveBack(identity, ended)
    }
    const units = leaseUnits(batch, cost, remaining)
    let finish!: () => void
    const entry: Held = {
      units: 0, until: now, takenAt: now, deadline: -Infinity, batch, remaining, resetAt: 0, moreAt: 0,
      taking: new Promise((resolve) => { finish = resolve })
    }
    this.follow(identity, entry)
    const settled = (): void => {
      entry.taking = undefined
      finish()
    }
    try {
      const decision = await this.decideInto(entry, identity, units, cost, now)
      settled()
      return decision
    } catch (error) {
      settled()
      if (this.held.get(identity) === entry) this.held.delete(identity)
      throw error
    }
  }

  /** The quota's decision on a lease of `units` for a request of `cost`, written into `entry`. */
  private async decideInto (entry: Held, identity: string, units: number, cost: number, now: number): Promise<RateDecision> {
    const policy = this.quota.policy
    let answer = await this.quota.decide(identity, units, now)
    let granted = units
    if (!answer.decision.allowed && units > cost) {
      // No room for the batch: the request alone, decided exactly (its refusal, its wait).
      entry.batch = 1
      answer = await this.quota.decide(identity, cost, this.quota.now())
      granted = cost
    }
    const { decision, serverNow } = answer
    entry.remaining = decision.remaining
    entry.resetAt = decision.resetAt
    // The Redis limiter's decisions always say it.
    entry.moreAt = decision.moreAt as number
    if (!decision.allowed) return decision
    entry.units = granted - cost
    entry.until = now + leaseEndsAt(policy, serverNow, this.settings.holdMs) - serverNow
    entry.deadline = returnDeadline(policy, serverNow)
    return allowedDecision(entry.units + decision.remaining, decision.resetAt, entry.moreAt)
  }

  /** Follows `identity` (most recent last); beyond `maxEntries` the one followed longest goes. */
  private follow (identity: string, entry: Held): void {
    const held = this.held
    held.delete(identity)
    if (held.size >= this.settings.maxEntries) {
      const [oldest, dropped] = held.entries().next().value as [string, Held]
      held.delete(oldest)
      this.giveBack(oldest, dropped)
    }
    held.set(identity, entry)
    if (this.timer === undefined) {
      this.timer = setInterval(() => { this.sweep() }, this.settings.holdMs)
      this.timer.unref()
    }
  }

  /** Gives back what ended leases did not use; forgets identities idle for a hold since. */
  private sweep (): void {
    const now = this.quota.now()
    for (const [identity, entry] of this.held) {
      if (entry.taking !== undefined || now < entry.until) continue
      this.giveBack(identity, entry)
      if (now >= entry.until + this.settings.holdMs) this.held.delete(identity)
    }
    if (this.held.size === 0) this.stopTimer()
  }

  /**
   * The lease's unused units go back to the quota, best effort: a give-back that fails or comes
   * too late (a window over) leaves them counted, which refuses more, never admits more. A
   * bucket's are dropped (`returnDeadline`).
   */
  private giveBack (identity: string, entry: Held): void {
    const units = entry.units
    entry.units = 0
    if (units <= 0 || entry.deadline === -Infinity) return
    const returned = this.quota.giveBack(identity, units, entry.deadline, this.quota.now()).catch(() => undefined)
    this.returning.add(returned)
    void returned.then(() => this.returning.delete(returned))
  }

  /** Forgets an identity's lease without giving it back (its state is being deleted). */
  forget (identity: string): void {
    this.held.delete(identity)
  }

  /** Gives back every lease and waits for the give-backs to settle. */
  async stop (): Promise<void> {
    this.stopTimer()
    for (const [identity, entry] of this.held) this.giveBack(identity, entry)
    this.held.clear()
    await Promise.all([...this.returning])
  }

  private stopTimer (): void {
    if (this.timer !== undefined) clearInterval(this.timer)
    this.timer = undefined
  }
}
