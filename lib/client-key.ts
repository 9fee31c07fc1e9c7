/**
 * The key of a client address. IPv4 stays as it is; an IPv4-mapped IPv6 address is its IPv4
 * address; other IPv6 addresses are grouped by their first `subnet` bits, since one host commonly
 * holds a whole /64 or /56 and would otherwise get a fresh bucket per address.
 */
export function clientKey (ip: string | undefined, subnet: number): string {
  if (ip === undefined) return ''
  if (!ip.includes(':')) return ip
  const groups = ipv6Groups(ip)
  if (groups === undefined) return ip
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

/** The eight 16-bit groups of an IPv6 address (with an optional zone and embedded IPv4), or undefined. */
function ipv6Groups (address: string): number[] | undefined {
  const zone = address.indexOf('%')
  const ip = (zone === -1 ? address : address.slice(0, zone)).toLowerCase()
  const halves = ip.split('::')
  if (halves.length > 2) return undefined
  const parse = (part: string): number[] | undefined => {
    if (part === '') return []
    const out: number[] = []
    const pieces = part.split(':')
    for (let i = 0; i < pieces.length; i++) {
      const piece = pieces[i]!
      if (piece.includes('.') && i === pieces.length - 1) {
        const octets = piece.split('.').map(Number)
        if (octets.length !== 4 || octets.some((o) => !Number.isInteger(o) || o < 0 || o > 255)) return undefined
        out.push(octets[0]! * 256 + octets[1]!, octets[2]! * 256 + octets[3]!)
      } else {
        if (!/^[0-9a-f]{1,4}$/.test(piece)) return undefined
        out.push(parseInt(piece, 16))
      }
    }
    return out
  }
  const head = parse(halves[0]!)
  const tail = halves.length === 2 ? parse(halves[1]!) : []
  if (head === undefined || tail === undefined) return undefined
  const missing = 8 - head.length - tail.length
  if (halves.length === 2 ? missing < 1 : missing !== 0) return undefined
  return [...head, ...new Array<number>(missing).fill(0), ...tail]
}
