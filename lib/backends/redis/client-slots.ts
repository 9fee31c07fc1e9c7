import { createHash, randomBytes } from 'node:crypto'
import type { ClientSlotBook } from '../../rates/backend.js'
import type { QuotaBackend } from './quota-backend.js'

/** How often a process renews the slots it holds, ms; each lapses three renewals after the last. */
export const CLIENT_SLOT_REFRESH_MS = 1000
export const CLIENT_SLOT_TTL_MS = 3 * CLIENT_SLOT_REFRESH_MS

/**
 * A client's slots on Redis: one sorted set per client key, `<prefix>{cif:<address>:<key>}`, one
 * member per slot held (`<process>:<n>`), scored with the server time it lapses at. A take drops
 * the lapsed members, then adds one while fewer than the limit remain, all at once on the server's
 * clock; a release removes its member. One key per call: Redis Cluster routes it by its tag.
 */
const TAKE_LUA = `local key = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
if redis.call('ZCARD', key) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', key, now + ttl, ARGV[1])
redis.call('PEXPIRE', key, ttl)
return 1`

/** Renews this process's members of one key (those still there: `XX`), and the key's own expiry. */
const RENEW_LUA = `local key = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', key, 'XX', now + ttl, ARGV[i]) end
redis.call('PEXPIRE', key, ttl)
return 1`

const RELEASE_LUA = `redis.call('ZREM', KEYS[1], ARGV[1])
return 1`

/**
 * A take comes with every request on a route with `clientInFlight`: sent by SHA (`EVALSHA`), as
 * decisions are. A release goes by its source (`EVAL`): a script the server does not know yet costs
 * a `NOSCRIPT` round trip before its source follows, and a release must reach the server before any
 * take this process sends after it — the same client's next request must find its slot free.
 */
const TAKE_SHA = createHash('sha1').update(TAKE_LUA).digest('hex')

/** A release or renewal that fails is left to the TTL: its slot lapses, it never admits more. */
const ignore = (): undefined => undefined

/**
 * This process's slots of every client at one address, on Redis. The slots it holds are renewed on
 * a timer (unref'd, never per request) every `CLIENT_SLOT_REFRESH_MS`; a slot lapses
 * `CLIENT_SLOT_TTL_MS` after its last renewal, so the slots of a process that dies (SIGKILL, a lost
 * host) are free within `CLIENT_SLOT_TTL_MS` of its death, on the server's clock. A release that
 * fails leaves its slot to lapse the same way: it is no longer renewed.
 */
export class RedisClientSlots implements ClientSlotBook {
  private readonly backend: QuotaBackend
  private readonly prefix: string
  private readonly process = `${process.pid}-${randomBytes(8).toString('hex')}`
  private next = 0
  /** The members this process holds, by client key. */
  private readonly held = new Map<string, string[]>()
  private timer: NodeJS.Timeout | undefined = undefined

  constructor (backend: QuotaBackend, address: string) {
    this.backend = backend
    this.prefix = `${backend.prefix}{cif:${address}:`
  }

  async take (key: string, limit: number): Promise<boolean> {
    const member = `${this.process}:${this.next++}`
    const taken = await this.backend.runScript(TAKE_SHA, TAKE_LUA, this.keyOf(key), [member, String(limit), String(CLIENT_SLOT_TTL_MS)])
    if (taken !== 1) return false
    const members = this.held.get(key)
    if (members === undefined) this.held.set(key, [member])
    else members.push(member)
    if (this.timer === undefined) {
      this.timer = setInterval(() => { this.renew() }, CLIENT_SLOT_REFRESH_MS)
      this.timer.unref()
    }
    return true
  }

  release (key: string): void {
    const members = this.held.get(key)!
    const member = members.pop()!
    if (members.length === 0) {
      this.held.delete(key)
      // Nothing left to renew: the timer stops, and starts again with the next slot taken.
      if (this.held.size === 0) this.stopRenewing()
    }
    this.backend.runOnce(RELEASE_LUA, this.keyOf(key), [member]).catch(ignore)
  }

  private renew (): void {
    const ttl = String(CLIENT_SLOT_TTL_MS)
    for (const [key, members] of this.held) this.backend.runOnce(RENEW_LUA, this.keyOf(key), [ttl, ...members]).catch(ignore)
  }

  private stopRenewing (): void {
    clearInterval(this.timer)
    this.timer = undefined
  }

  async stop (): Promise<void> {
    this.stopRenewing()
    const releases: Array<Promise<unknown>> = []
    for (const [key, members] of this.held) {
      for (const member of members) releases.push(this.backend.runOnce(RELEASE_LUA, this.keyOf(key), [member]).catch(ignore))
    }
    this.held.clear()
    await Promise.all(releases)
  }

  private keyOf (key: string): string {
    return `${this.prefix}${key}}`
  }
}
