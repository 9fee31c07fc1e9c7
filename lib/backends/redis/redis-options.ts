import { RatesInvalidArgumentError } from '../../rates/errors.js'
import { exactObject, positiveInteger } from '../../validation/checks.js'
import { show } from '../../validation/show.js'
import type { LeaseSettings } from './lease-book.js'
import { clientShape, type RedisBackendClient, type RedisClientShape } from './redis-client.js'

export const DEFAULT_PREFIX = 'admission:'
export const DEFAULT_TIMEOUT_MS = 50
export const DEFAULT_DENY_CACHE_ENTRIES = 10_000
export const DEFAULT_LEASES: Readonly<LeaseSettings> = Object.freeze({ maxUnits: 100, holdMs: 100, maxEntries: 10_000 })
// The first sentence is the one the ioredis-only backend had (tests pin it); node-redis follows
// the value.
const CLIENT_EXPECTED = 'a Redis client with evalsha() and eval() (an ioredis or iovalkey instance)'
const CLIENT_ALSO = 'or a node-redis client or cluster, with evalSha() and eval()'
// A lease holds units away from the other processes for up to its hold: seconds at most.
const MAX_HOLD_MS = 60_000
const HOLD_EXPECTED = `a whole number of milliseconds from 1 to ${MAX_HOLD_MS}`
const LEASE_OPTIONS = { keys: ['maxUnits', 'holdMs', 'maxEntries'], expected: 'true, false or an object { maxUnits?, holdMs?, maxEntries? }', options: true }
const DENY_CACHE_OPTIONS = { keys: ['maxEntries'], expected: 'false or an object { maxEntries? }', options: true }

/** The client and its calling convention, recognised by its methods; any other value is refused. */
export function clientFrom (client: unknown): { client: RedisBackendClient, shape: RedisClientShape } {
  const shape = clientShape(client)
  if (shape === undefined) {
    throw new RatesInvalidArgumentError('options.client', CLIENT_EXPECTED, client, { got: `${show(client)} — ${CLIENT_ALSO}` })
  }
  return { client: client as RedisBackendClient, shape }
}

export function prefixFrom (prefix: unknown): string {
  if (prefix === undefined) return DEFAULT_PREFIX
  if (typeof prefix !== 'string' || /[{}]/.test(prefix)) {
    throw new RatesInvalidArgumentError('options.prefix', 'a string without { or } (the key\'s hash tag follows it)', prefix)
  }
  return prefix
}

export function timeoutFrom (timeoutMs: unknown): number {
  if (timeoutMs === undefined) return DEFAULT_TIMEOUT_MS
  return positiveInteger(RatesInvalidArgumentError.complain, 'options.timeoutMs', timeoutMs, 'a positive safe integer (milliseconds)')
}

export function denyCacheFrom (denyCache: unknown): number {
  if (denyCache === undefined) return DEFAULT_DENY_CACHE_ENTRIES
  if (denyCache === false) return 0
  const { maxEntries } = exactObject(RatesInvalidArgumentError.complain, 'options.denyCache', denyCache, DENY_CACHE_OPTIONS)
  if (maxEntries === undefined) return DEFAULT_DENY_CACHE_ENTRIES
  return positiveInteger(RatesInvalidArgumentError.complain, 'options.denyCache.maxEntries', maxEntries)
}

export function leasesFrom (leases: unknown): LeaseSettings | undefined {
  if (leases === undefined || leases === false) return undefined
  if (leases === true) return DEFAULT_LEASES
  const given = exactObject(RatesInvalidArgumentError.complain, 'options.leases', leases, LEASE_OPTIONS)
  const at = (name: 'maxUnits' | 'holdMs' | 'maxEntries', expected?: string): number =>
    given[name] === undefined ? DEFAULT_LEASES[name] : positiveInteger(RatesInvalidArgumentError.complain, `options.leases.${name}`, given[name], expected)
  const holdMs = at('holdMs', HOLD_EXPECTED)
  if (holdMs > MAX_HOLD_MS) throw RatesInvalidArgumentError.complain({ path: 'options.leases.holdMs', expected: HOLD_EXPECTED, value: holdMs })
  return Object.freeze({ maxUnits: at('maxUnits'), holdMs, maxEntries: at('maxEntries') })
}
