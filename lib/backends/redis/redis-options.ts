import { RatesInvalidArgumentError } from '../../rates/errors.js'
import type { RedisDenyCacheOptions, RedisScriptClient } from './redis-backend.js'

export const DEFAULT_PREFIX = 'admission:'
export const DEFAULT_TIMEOUT_MS = 50
export const DEFAULT_DENY_CACHE_ENTRIES = 10_000

export function clientFrom (client: unknown): RedisScriptClient {
  const candidate = client as { evalsha?: unknown, eval?: unknown } | null
  if (typeof candidate !== 'object' || candidate === null || typeof candidate.evalsha !== 'function' || typeof candidate.eval !== 'function') {
    throw new RatesInvalidArgumentError('options.client', 'a Redis client with evalsha() and eval() (an ioredis or iovalkey instance)', client)
  }
  return client as RedisScriptClient
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
  if (typeof timeoutMs !== 'number' || !Number.isSafeInteger(timeoutMs) || timeoutMs <= 0) {
    throw new RatesInvalidArgumentError('options.timeoutMs', 'a positive safe integer (milliseconds)', timeoutMs)
  }
  return timeoutMs
}

export function denyCacheFrom (denyCache: unknown): number {
  if (denyCache === undefined) return DEFAULT_DENY_CACHE_ENTRIES
  if (denyCache === false) return 0
  const expected = 'false or an object { maxEntries? }'
  if (typeof denyCache !== 'object' || denyCache === null || Object.getPrototypeOf(denyCache) !== Object.prototype) {
    throw new RatesInvalidArgumentError('options.denyCache', expected, denyCache)
  }
  for (const key of Reflect.ownKeys(denyCache)) {
    if (key !== 'maxEntries') {
      throw new RatesInvalidArgumentError(`options.denyCache.${String(key)}`, `${expected} (unknown option)`, (denyCache as Record<PropertyKey, unknown>)[key])
    }
  }
  const maxEntries = (denyCache as RedisDenyCacheOptions).maxEntries
  if (maxEntries === undefined) return DEFAULT_DENY_CACHE_ENTRIES
  if (typeof maxEntries !== 'number' || !Number.isSafeInteger(maxEntries) || maxEntries <= 0) {
    throw new RatesInvalidArgumentError('options.denyCache.maxEntries', 'a positive safe integer', maxEntries)
  }
  return maxEntries
}
