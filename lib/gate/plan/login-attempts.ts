import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify'
import { UNDECIDABLE } from '../../rates/backend.js'
import type { StackDecision } from '../../rates/decision.js'
import { moreAtOf, rateLimitList } from '../headers/rate-limit-fields.js'
import { withPartitionKey, type PartitionKey } from '../headers/partition-key.js'
import { expiringLimitWriter, writeStack, type ExpiringLimit, type HeaderFormat } from '../headers/header-formats.js'
import type { StackedQuota } from '../quotas/stacked-quota.js'
import type { PermitRecord } from '../release/permit-record.js'
import type { FailedResponse } from '../options/login-options.js'
import { refusedByGate } from '../outcomes/refusal-text.js'


/**
 * Login throttling (`count: 'failures'`): a request is admitted while its client's quota has room
 * for it — a check that takes nothing — and a failed response takes `cost` from the quota, when it
 * is sent. A decision once made stays made: an admitted request is never refused later and a
 * failure is never refunded. Attempts in flight count as failures to come (the quota's `pending`,
 * by the key the check used), from the moment the check is sent: a check answered by promise
 * (Redis) is still on its way while the next ones are sent, and each must see the others, or a
 * burst sent at once would pass as a whole. An attempt ends when its response is sent (`onSend`,
 * which runs for every response the route sends, errors too, and after the client went away), or
 * with its permit, whichever comes first: a refused or failed check ends the permit (the refusal),
 * so it stops counting at once; an attempt whose reply is never sent (hijacked, its client gone)
 * stops counting when its permit ends.
 *
 * With the `RateLimit` fields on, the response that records a failure says what is left after it
 * (the check before the handler could only say what was left before): a synchronous backend's
 * numbers at once, a remote one's when its answer comes — the response waits for that round trip
 * (a failure is the slow path of a login anyway). A failure that could not be recorded leaves the
 * check's numbers.
 */
export class LoginAttempts {
  /** Attempts admitted and not yet answered (each permit's key is the one its check used). */
  private readonly attempts = new WeakSet<PermitRecord>()
  private readonly quota: StackedQuota
  private readonly failed: FailedResponse
  private readonly cost: number
  private readonly log: FastifyBaseLogger
  private readonly route: string
  private failing = false
  private readonly headers: boolean
  private readonly partitionKey: PartitionKey | undefined
  /** Draft 11's `RateLimit` is sent; `older`: the older formats' writer, when they are. */
  private readonly draft11: boolean
  private readonly older: ExpiringLimit | undefined

  constructor (parts: { quota: StackedQuota, failed: FailedResponse, cost: number, log: FastifyBaseLogger, route: string, formats: readonly HeaderFormat[], partitionKey: PartitionKey | undefined }) {
    this.quota = parts.quota
    this.headers = parts.formats.length !== 0
    this.draft11 = parts.formats.includes('draft-11')
    this.older = expiringLimitWriter(parts.formats)
    this.partitionKey = parts.partitionKey
    this.failed = parts.failed
    this.cost = parts.cost
    this.log = parts.log
    this.route = parts.route
  }

  /**
   * Just before the quota's check (the plan's `loginAttempt` step): the attempt is in flight from
   * now, until its response says whether it failed, or its permit ends (a refusal among the ways).
   */
  begin (permit: PermitRecord): void {
    this.attempts.add(permit)
    const key = permit.key!
    const pending = this.quota.pending
    pending.set(key, (pending.get(key) ?? 0) + this.cost)
  }

  /** The attempt is over (its response is sent, or its permit ended): it no longer counts as in flight. Whether it was one. */
  readonly ended = (permit: PermitRecord): boolean => {
    if (!this.attempts.delete(permit)) return false
    const key = permit.key!
    const pending = this.quota.pending
    const left = pending.get(key)! - this.cost
    if (left > 0) pending.set(key, left)
    else pending.delete(key)
    return true
  }

  /**
   * The route's response is being sent: a failure takes from the client's quota. A promise when the
   * response should wait for it (its `RateLimit` field follows the remote decision); it never rejects.
   * `tell`: false once the response is written (its field can no longer follow).
   */
  sending (permit: PermitRecord, tell = true): Promise<void> | undefined {
    if (!this.ended(permit)) return
    const { request, reply } = permit
    // Another registration's refusal (a per-account quota inside a per-address one) is no failed login.
    if (refusedByGate(reply)) return
    const key = permit.key!
    let failed: unknown
    try {
      failed = this.failed(request, reply)
    } catch (error) {
      this.trouble(error, 'the failed() option threw')
      return
    }
    if (failed !== true) {
      // A promise is no answer (the response is on its way now); its rejection is the
      // application's, caught here so that it cannot end the process.
      if (isThenable(failed)) {
        this.trouble(undefined, 'the failed() option returned a promise, not a boolean')
        failed.then(undefined, (error: unknown) => { this.trouble(error, 'the failed() option\'s promise rejected') })
      }
      return
    }
    let recorded
    try {
      recorded = this.quota.record(key, this.cost)
    } catch (error) {
      this.trouble(error, 'the backend threw')
      return
    }
    if (recorded === UNDECIDABLE) {
      this.trouble(undefined, 'every tracked client has live state')
      return
    }
    const headers = this.headers && tell
    if (typeof recorded === 'object') {
      const told = recorded.then((decision) => {
        this.failing = false
        if (headers) this.tell(reply, key, decision.policies.map((p) => p.remaining), decision.policies.map(moreAtOf), decision.policies.map((p) => p.resetAt), Date.now())
      }, (error: unknown) => { this.trouble(error, 'the backend could not record it') })
      return headers ? told : undefined
    }
    this.failing = false
    if (headers) {
      const sync = this.quota.sync!
      this.tell(reply, key, sync.remaining, sync.moreAt, sync.resetAt, sync.decidedAt)
    }
  }

  /** The fields after the failure, in each format sent, from the stack's own numbers. */
  private tell (reply: FastifyReply, key: string, remaining: ArrayLike<number>, moreAt: ArrayLike<number>, resetAt: ArrayLike<number>, now: number): void {
    const quota = this.quota
    if (this.draft11) {
      const value = rateLimitList(quota.starts, quota.quotas, remaining, moreAt, now)
      const pk = this.partitionKey
      reply.header('ratelimit', pk === undefined ? value : withPartitionKey(value, pk(key)))
    }
    if (this.older !== undefined) writeStack(this.older, reply, quota.quotas, remaining, resetAt, now, undefined)
  }

  /** A failure that could not be counted: logged once until one is counted again. */
  private trouble (error: unknown, why: string): void {
    if (this.failing) return
    this.failing = true
    this.log.error({ route: this.route, err: error }, `fastify-admission: a failed response of ${this.route} was not counted (${why}); logging again once one is`)
  }
}

function isThenable (value: unknown): value is PromiseLike<unknown> {
  return typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function'
}
