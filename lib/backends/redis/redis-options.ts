import { RatesInvalidArgumentError } from '../../rates/errors.js'
import { exactObject, positiveInteger } from '../../validation/checks.js'
import type { RedisScriptClient } from './redis-backend.js'

export const DEFAULT_PREFIX = 'admission:'
export const DEFAULT_TIMEOUT_MS = 50
export const DEFAULT_DENY_CACHE_ENTRIES = 10_000
const DENY_CACHE_OPTIONS = { keys: ['maxEntries'], expected: 'false or an object { maxEntries? }', options: true }

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
  return positiveInteger(RatesInvalidArgumentError.complain, 'options.timeoutMs', timeoutMs, 'a positive safe integer (milliseconds)')
}

export function denyCacheFrom (denyCache: unknown): number {
  if (denyCache === undefined) return DEFAULT_DENY_CACHE_ENTRIES
  if (denyCache === false) return 0
  const { maxEntries } = exactObject(RatesInvalidArgumentError.complain, 'options.denyCache', denyCache, DENY_CACHE_OPTIONS)
  if (maxEntries === undefined) return DEFAULT_DENY_CACHE_ENTRIES
  return positiveInteger(RatesInvalidArgumentError.complain, 'options.denyCache.maxEntries', maxEntries)
}
