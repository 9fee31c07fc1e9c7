/** The seed's modulus: the largest prime below 2^32. */
const MODULUS = 4294967291

/**
 * The seed's key of an address: h = (h * 131 + byte) mod 4294967291 over its UTF-8 bytes, from 0.
 * h < 2^32, so h * 131 + 255 < 2^40 stays exact in a double. Lone surrogates are encoded as
 * U+FFFD, as TextEncoder does.
 */
export function ipKey (ip: string): number {
  let h = 0
  const step = (byte: number): void => { h = (h * 131 + byte) % MODULUS }
  for (let i = 0; i < ip.length; i++) {
    let c = ip.charCodeAt(i)
    if (c >= 0xd800 && c <= 0xdfff) {
      const next = i + 1 < ip.length ? ip.charCodeAt(i + 1) : 0
      if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) * 0x400) + (next - 0xdc00)
        i++
      } else {
        c = 0xfffd
      }
    }
    if (c < 0x80) {
      step(c)
    } else if (c < 0x800) {
      step(0xc0 + Math.floor(c / 0x40)); step(0x80 + (c % 0x40))
    } else if (c < 0x10000) {
      step(0xe0 + Math.floor(c / 0x1000)); step(0x80 + (Math.floor(c / 0x40) % 0x40)); step(0x80 + (c % 0x40))
    } else {
      step(0xf0 + Math.floor(c / 0x40000)); step(0x80 + (Math.floor(c / 0x1000) % 0x40))
      step(0x80 + (Math.floor(c / 0x40) % 0x40)); step(0x80 + (c % 0x40))
    }
  }
  return h
}
