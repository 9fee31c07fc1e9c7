import { isTiers, type Limits } from './limits.js'
import { AdmissionOptionError } from '../errors.js'
import type { AdmissionHook } from './option-types.js'

/**
 * The options that choose which hooks a route gets (`hook`, `enforce`, `allowList.skipsShedding`)
 * and which quota it takes from (`groupId`), checked once, at registration or at the route.
 */

export function booleanOption (path: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback
  if (typeof value !== 'boolean') throw new AdmissionOptionError(path, 'a boolean', value)
  return value
}

/** `skipsShedding`: the plugin's `allowList.skipsShedding`, which needs the allow list in `onRequest`. */
export function hookOption (path: string, value: unknown, fallback: AdmissionHook, skipsShedding: boolean): AdmissionHook {
  if (value === undefined) return fallback
  if (value !== 'onRequest' && value !== 'preHandler') throw new AdmissionOptionError(path, "'onRequest' or 'preHandler'", value)
  if (value === 'preHandler' && skipsShedding) {
    throw new AdmissionOptionError(path, "'onRequest' while allowList.skipsShedding is true (the allow list decides before shedding, which stays in onRequest)", value)
  }
  return value
}

/** `allowList.skipsShedding`: the list decides before shedding, in `onRequest`, so not with `hook: 'preHandler'`. */
export function skipsSheddingOption (path: string, value: unknown, hook: AdmissionHook): boolean {
  const skips = booleanOption(path, value, false)
  if (skips && hook === 'preHandler') {
    throw new AdmissionOptionError(path, "false with hook 'preHandler' (the allow list would decide before shedding, in onRequest, before authentication)", value)
  }
  return skips
}

/** A group's name: part of its quota's address, the same in every process. */
export function groupIdOption (path: string, value: unknown, policy: Limits | false): string | undefined {
  if (value === undefined) return undefined
  if (typeof value !== 'string' || value.length === 0 || value.length > 128 || !(value as string & { isWellFormed (): boolean }).isWellFormed()) {
    throw new AdmissionOptionError(path, 'a non-empty string of at most 128 characters', value)
  }
  if (policy === false) throw new AdmissionOptionError(path, 'absent where there is no rate limit (a group shares a quota)', value)
  if (isTiers(policy)) throw new AdmissionOptionError(path, 'absent where the rate limit has tiers (a group shares one quota)', value)
  return value
}
