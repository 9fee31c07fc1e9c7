import { BlockList, isIP } from 'node:net'
import type { FastifyRequest } from 'fastify'
import { gateKey } from '../client-key.js'
import { AdmissionAllowListError, AdmissionOptionError } from '../errors.js'
import { exactObject, stringList } from '../../validation/checks.js'
import { isThenable, settleUnused } from '../../callbacks/contained.js'

/** `allowList` as a function: a truthy result lets the client past the rate limit (as with @fastify/rate-limit). */
export type AllowListFunction = (request: FastifyRequest, key: string) => unknown

/**
 * `allowList`: client keys, IP addresses and CIDR ranges (IPv4 and IPv6), or a synchronous
 * function of the request and the client's key.
 */
export type AllowListOption = readonly string[] | AllowListFunction

/**
 * The plugin's `allowList` may also say whether the clients on it skip shedding too:
 * `{ clients, skipsShedding: true }` (default false: a full server sheds everyone).
 */
export interface SheddingAllowListOptions {
  clients: AllowListOption
  skipsShedding?: boolean
}

/** Whether a client is on the list: `key` is its key as the gate uses it. Throws only what the application's function throws. */
export type AllowMatcher = (request: FastifyRequest, key: string) => boolean

const MAX_ENTRIES = 100_000
const EXPECTED = 'an array of client keys, IP addresses and CIDR ranges, or a synchronous function (request, key) => boolean'

/**
 * The `allowList` option (the plugin's or a route's), checked once. `keyed` says whether the
 * application keys clients itself (the `key` option): without it the key is the address, and an
 * entry that is neither an address nor a range could never match — a mistake, refused here.
 */
export function allowListOption (path: string, value: unknown, keyed: boolean): AllowMatcher | undefined {
  if (value === undefined) return undefined
  if (typeof value === 'function') {
    const allow = value as AllowListFunction
    // An async function's answer is a promise, which is always truthy.
    if (Object.prototype.toString.call(allow) === '[object AsyncFunction]') throw new AdmissionOptionError(path, 'a synchronous function (request, key) => boolean (an async function returns a promise, not an answer)', value)
    return (request, key) => {
      const answer = allow(request, key)
      if (isThenable(answer)) {
        settleUnused(answer)
        throw new AdmissionAllowListError(answer)
      }
      return Boolean(answer)
    }
  }
  const entries = stringList(AdmissionOptionError.complain, path, value, EXPECTED, MAX_ENTRIES)
  const addresses = new BlockList()
  const keys = new Set<string>()
  let ranges = 0
  entries.forEach((entry, i) => {
    if (addressEntry(addresses, entry, `${path}[${i}]`)) ranges++
    else if (!keyed) throw new AdmissionOptionError(`${path}[${i}]`, 'an IP address or a CIDR range (without a `key` option the client\'s key is its address)', entry)
    else keys.add(keyEntry(`${path}[${i}]`, entry))
  })
  if (ranges === 0) return (_request, key) => keys.has(key)
  const onList = addressList(addresses)
  if (keys.size === 0) return (request) => onList(request.ip)
  return (request, key) => keys.has(key) || onList(request.ip)
}

const PLUGIN_SHAPE = { keys: ['clients', 'skipsShedding'], expected: `${EXPECTED}, or an object { clients, skipsShedding? }`, nullPrototype: true, options: true }

/**
 * The plugin's `allowList`: the list (or function) as a route's, or `{ clients, skipsShedding }`.
 * `skipsShedding` is handed back unchecked: whether it may be true depends on the plugin's `hook`.
 */
export function pluginAllowListOption (value: unknown, keyed: boolean): { allowList: AllowMatcher | undefined, skipsShedding: unknown } {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { allowList: allowListOption('allowList', value, keyed), skipsShedding: undefined }
  const input = exactObject(AdmissionOptionError.complain, 'allowList', value, PLUGIN_SHAPE)
  if (input.clients === undefined) throw new AdmissionOptionError('allowList.clients', `${EXPECTED} (the clients on the list)`, undefined)
  return { allowList: allowListOption('allowList.clients', input.clients, keyed), skipsShedding: input.skipsShedding }
}

/** Addresses remembered at once by an address list: a bound on its memory, whatever the traffic. */
export const REMEMBERED_ADDRESSES = 10_000

/**
 * Whether an address is on the list. `BlockList.check()` builds a `SocketAddress` per call (about
 * 6 µs here, more than the rest of the gate), and the answer for an address never changes, so
 * answers are remembered — up to `REMEMBERED_ADDRESSES`, then forgotten all at once (a flood of
 * new addresses pays the check each, never unbounded memory).
 */
function addressList (addresses: BlockList): (ip: string | undefined) => boolean {
  const known = new Map<string, boolean>()
  return (ip) => {
    if (ip === undefined) return false
    let answer = known.get(ip)
    if (answer === undefined) {
      // IPv4-mapped IPv6 addresses match IPv4 entries (BlockList does that for the 'ipv6' family).
      answer = addresses.check(ip, ip.includes(':') ? 'ipv6' : 'ipv4')
      if (known.size >= REMEMBERED_ADDRESSES) known.clear()
      known.set(ip, answer)
    }
    return answer
  }
}

/** Adds `entry` to `addresses` when it is an IP address or a CIDR range; false when it is neither (a key). */
function addressEntry (addresses: BlockList, entry: string, path: string): boolean {
  const slash = entry.lastIndexOf('/')
  const address = slash === -1 ? entry : entry.slice(0, slash)
  const family = isIP(address)
  if (family === 0) return false
  const type = family === 4 ? 'ipv4' : 'ipv6'
  try {
    if (slash === -1) {
      addresses.addAddress(address, type)
      return true
    }
    const prefix = entry.slice(slash + 1)
    const bits = /^(0|[1-9][0-9]{0,2})$/.test(prefix) ? Number(prefix) : -1
    addresses.addSubnet(address, bits, type)
    return true
  } catch {
    // A zone index (`fe80::1%eth0`), a prefix that is not a number or past the family's bits.
    throw new AdmissionOptionError(path, `an IP address, or a CIDR range address/bits with bits from 0 to ${family === 4 ? 32 : 128}`, entry)
  }
}

/** A key entry as the gate encodes keys, so that it meets the client's key exactly. */
function keyEntry (path: string, entry: string): string {
  try {
    return gateKey(entry)
  } catch {
    throw new AdmissionOptionError(path, 'a client key of at most 1024 UTF-8 bytes', entry)
  }
}
