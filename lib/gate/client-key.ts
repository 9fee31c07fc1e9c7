import { isIPv6 } from 'node:net'
import { Buffer } from 'node:buffer'
import { AdmissionKeyError, AdmissionOptionError } from './errors.js'
import { isPositiveSafeInteger } from '../validation/checks.js'
import { isThenable, settleUnused } from '../callbacks/contained.js'

/**
 * The key of a client address. IPv4 stays as it is; an IPv4-mapped IPv6 address is its IPv4
 * address; other IPv6 addresses are grouped by their first `subnet` bits, since one host commonly
 * holds a whole /64 or /56 and would otherwise get a fresh bucket per address.
 */
export function clientKey (ip: string | undefined, subnet: number): string {
  if (ip === undefined) return ''
  if (!ip.includes(':')) return ip
  // Anything but a well-formed IPv6 address stays whole: a unique key of its own.
  if (!isIPv6(ip)) return ip
  const groups = ipv6Groups(ip)
  if (groups[0] === 0 && groups[1] === 0 && groups[2] === 0 && groups[3] === 0 && groups[4] === 0 && groups[5] === 0xffff) {
    return `${groups[6]! >> 8}.${groups[6]! & 0xff}.${groups[7]! >> 8}.${groups[7]! & 0xff}`
  }
  let key = ''
  for (let i = 0; i < 8; i++) {
    const kept = Math.max(0, Math.min(16, subnet - i * 16))
    const mask = kept === 0 ? 0 : (0xffff << (16 - kept)) & 0xffff
    key += (i === 0 ? '' : ':') + (groups[i]! & mask).toString(16)
  }
  return `${key}/${subnet}`
}

/**
 * The default key's value for an address (`request.ip`): what a `key` function returns to share the
 * default's quota, as in `key: (request) => apiKey(request) ?? normalizeIP(request.ip)`. IPv4 as it
 * is, an IPv4-mapped IPv6 address as its IPv4 address, other IPv6 addresses grouped by their first
 * `ipv6Subnet` bits (default 56, the plugin's default) as `prefix/bits`, anything else lowercased
 * (as @fastify/rate-limit's `normalizeIP`, which groups by 64 and writes the subnet's first
 * address: docs/migration/rate-limit.md says why this one does not).
 */
export function normalizeIP (ip: string, ipv6Subnet = 56): string {
  if (typeof ip !== 'string') throw new AdmissionOptionError('normalizeIP(ip)', 'a string (an address, as request.ip)', ip)
  if (!isPositiveSafeInteger(ipv6Subnet) || ipv6Subnet > 128) throw new AdmissionOptionError('normalizeIP(ip, ipv6Subnet)', 'a prefix length from 1 to 128', ipv6Subnet)
  return isIPv6(ip) ? clientKey(ip, ipv6Subnet) : ip.toLowerCase()
}

/** The eight 16-bit groups of a well-formed IPv6 address (zone dropped, embedded IPv4 expanded). */
function ipv6Groups (address: string): number[] {
  const zone = address.indexOf('%')
  const ip = (zone === -1 ? address : address.slice(0, zone)).toLowerCase()
  const parse = (part: string): number[] => {
    if (part === '') return []
    const out: number[] = []
    for (const piece of part.split(':')) {
      if (piece.includes('.')) {
        const [a, b, c, d] = piece.split('.').map(Number) as [number, number, number, number]
        out.push(a * 256 + b, c * 256 + d)
      } else {
        out.push(parseInt(piece, 16))
      }
    }
    return out
  }
  const gap = ip.indexOf('::')
  if (gap === -1) return parse(ip)
  const head = parse(ip.slice(0, gap))
  const tail = parse(ip.slice(gap + 2))
  return [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail]
}

/** UTF-8 bytes a key may have (the rates capability's identity bound). */
export const MAX_KEY_BYTES = 1024
// A UTF-16 code unit is at most 3 UTF-8 bytes: a key this short needs no counting.
const SHORT_KEY = Math.floor(MAX_KEY_BYTES / 3)

interface WellFormed { isWellFormed (): boolean }

/**
 * A `key(request)` result as the quota's identity, injective on every backend. A well-formed
 * string is itself; a string with a lone surrogate (which UTF-8, and so Redis, would store as
 * U+FFFD, merging it with other keys) is escaped by JSON after a NUL, and so is a key that starts
 * with NUL, so no escaped form can equal a plain key. Anything else is an `AdmissionKeyError`.
 */
export function gateKey (key: unknown): string {
  if (typeof key !== 'string') {
    if (isThenable(key)) settleUnused(key)
    throw new AdmissionKeyError(key, key === null ? 'null' : `a value of type ${typeof key}`)
  }
  const encoded = (key as string & WellFormed).isWellFormed() && key.charCodeAt(0) !== 0 ? key : '\u0000' + JSON.stringify(key)
  if (encoded.length > SHORT_KEY) {
    const bytes = Buffer.byteLength(encoded, 'utf8')
    if (bytes > MAX_KEY_BYTES) throw new AdmissionKeyError(key, `a string of ${bytes} UTF-8 bytes (as stored)`)
  }
  return encoded
}

/**
 * How the gate finds a request's client key: the application's `key` (checked: `gateKey`), or the
 * request's address grouped as `clientKey` does.
 */
export function keyFunction<R extends { ip: string }> (key: ((request: R) => unknown) | undefined, ipv6Subnet: number): (request: R) => string {
  if (key === undefined) return (request) => clientKey(request.ip, ipv6Subnet)
  return (request) => gateKey(key(request))
}
