import { randomBytes } from 'node:crypto'
import type { FleetMember, FleetView } from '../../rates/backend.js'
import { RatesStoppedError, RatesUnavailableError } from '../../rates/errors.js'
import type { QuotaBackend } from './quota-backend.js'

/**
 * A fleet's members on Redis: one sorted set per fleet, `<prefix>{fleet:<name>}`, each live
 * process a member whose score is the server time its entry expires at. A refresh (on the gate's
 * timer, never per request) drops the expired entries, renews this one, and answers how many are
 * live and where this one sorts among their names, all at once on the server's clock. A process
 * that dies stops renewing and is gone from every view within its TTL. A member's name starts with
 * the fleet limit it was registered with (`<limit>.`), so that a view also says the least and the
 * most limit the members were given: two deployments at one address with different limits are
 * seen. Rare calls: plain EVAL.
 */
const FLEET_LUA = `local key = KEYS[1]
local member = ARGV[1]
local ttl = tonumber(ARGV[2])
if ARGV[3] == 'leave' then
  redis.call('ZREM', key, member)
  return { 0, 0 }
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
redis.call('ZADD', key, now + ttl, member)
redis.call('PEXPIRE', key, ttl)
local names = redis.call('ZRANGE', key, 0, -1)
table.sort(names)
local rank = 0
local least, most = 0, 0
for i, name in ipairs(names) do
  if name == member then rank = i - 1 end
  local limit = tonumber(string.match(name, '^(%d+)%.'))
  if limit then
    if least == 0 or limit < least then least = limit end
    if limit > most then most = limit end
  end
end
return { #names, rank, least, most }`

export class RedisFleetMember implements FleetMember {
  /** This process's name in the fleet: its limit, then random, so that two processes never share one. */
  readonly member: string
  private readonly backend: QuotaBackend
  private readonly key: string
  private readonly ttlMs: number
  private readonly name: string

  constructor (backend: QuotaBackend, name: string, ttlMs: number, limit?: number) {
    this.member = `${limit === undefined ? '' : `${limit}.`}${process.pid}-${randomBytes(8).toString('hex')}`
    this.backend = backend
    this.name = name
    this.key = `${backend.prefix}{fleet:${name}}`
    this.ttlMs = ttlMs
  }

  async refresh (): Promise<FleetView> {
    if (this.backend.isStopped) throw new RatesStoppedError(`fleet ${this.name}`)
    const reply = await this.backend.runOnce(FLEET_LUA, this.key, [this.member, String(this.ttlMs), ''])
    if (Array.isArray(reply) && reply.length === 4 && reply.every((n) => Number.isSafeInteger(n) && n >= 0) && reply[0] >= 1 && reply[1] < reply[0] && reply[2] <= reply[3]) {
      return { members: reply[0] as number, rank: reply[1] as number, least: reply[2] as number, most: reply[3] as number }
    }
    throw new RatesUnavailableError(`unexpected reply from the fleet script for ${JSON.stringify(this.key)}: ${JSON.stringify(reply)}`)
  }

  async leave (): Promise<void> {
    if (this.backend.isStopped) return
    await this.backend.runOnce(FLEET_LUA, this.key, [this.member, String(this.ttlMs), 'leave'])
  }
}
