/**
 * The index key of a client key in the state table. Most keys of an HTTP gate are IPv4 addresses
 * (the default key is the client's address): held as strings they cost about 40 B each on top of
 * the state (a V8 string of 7 to 15 characters and its header), more than the state itself. A
 * canonical dotted quad is instead held as its 32 bits in a signed 32-bit integer, which V8 keeps
 * in the `Map` entry itself (a small integer, no allocation on 64-bit builds).
 *
 * Injective: only the canonical form (four decimal parts 0–255, no leading zero, nothing else)
 * becomes a number, and canonical forms and 32-bit values correspond one to one; every other
 * string stays itself, and a `Map` never confuses a number with a string. `"01.2.3.4"` and
 * `"1.2.3.4"` are different clients here, as they are on every other backend.
 */
export function compactKey (key: string): string | number {
  const length = key.length
  if (length < 7 || length > 15) return key
  let value = 0
  let part = 0
  let digits = 0
  let dots = 0
  for (let i = 0; i < length; i++) {
    const c = key.charCodeAt(i)
    if (c === 46) { // '.'
      if (digits === 0 || dots === 3) return key
      value = (value << 8) | part
      part = 0
      digits = 0
      dots++
    } else {
      const d = c - 48
      // A digit; no leading zero (a part "0" is one digit); at most 255.
      if (d < 0 || d > 9 || (digits === 1 && part === 0)) return key
      part = part * 10 + d
      digits++
      if (part > 255) return key
    }
  }
  if (dots !== 3 || digits === 0) return key
  return (value << 8) | part
}
