// Bytes per live identity: `node --expose-gc --import tsx bench/memory.ts <admission|local-store> [n]`.
// Prints one JSON line (MemoryResult). The first store, of one key, loads the code before the
// first reading, so the difference is the registry alone.
import { createRequire } from 'node:module'
import { tokenBucketLimiter } from './limiter.js'
import { used } from './heap.js'

export interface MemoryResult {
  store: string
  identities: number
  /**
   * Heap and array buffers the registry holds per live identity, key strings included: each key
   * is built fresh as a request's address would be and dropped after the call, so whatever the
   * store keeps of it (the string, or nothing) is in this number.
   */
  bytesPerIdentity: number
}

interface Store { add (key: string): void, size (): number }

interface LocalStoreLike {
  incr (key: string, cb: (error: Error | null, result: unknown) => void, timeWindow: number, max: number): void
  lru: { size: number }
}

function storeOf (name: string, n: number): Store {
  if (name === 'admission') {
    const limiter = tokenBucketLimiter({ limit: 100, windowMs: 60_000, burst: 20 }, n)
    return {
      add (key) { if (!limiter.consume(key, 1000, 1)) throw new Error('not admitted') },
      size: () => limiter.size
    }
  }
  if (name === 'local-store') {
    const require = createRequire(import.meta.url)
    const LocalStore = require('@fastify/rate-limit/store/LocalStore.js') as new (ce: boolean, eb: boolean, cache: number) => LocalStoreLike
    const store = new LocalStore(false, false, n)
    const ignore = (): void => {}
    return { add (key) { store.incr(key, ignore, 60_000, 100) }, size: () => store.lru.size }
  }
  throw new Error(`unknown store ${name}`)
}

// A fresh string per call, as `request.ip` is per connection: nothing but the store keeps it.
function addressOf (i: number): string {
  return `${(i >>> 24) & 255}.${(i >>> 16) & 255}.${(i >>> 8) & 255}.${i & 255}`
}

const [name = 'admission', nArg = '1000000'] = process.argv.slice(2)
const n = Number(nArg)
const store = storeOf(name, 1)
const before = used()
// The default bound (1,000,000), as an application has it; at most `n` otherwise.
const measured = storeOf(name, Math.max(n, 1_000_000))
for (let i = 0; i < n; i++) measured.add(addressOf(i))
const after = used()
if (measured.size() !== n) throw new Error(`${name}: ${measured.size()} identities, expected ${n}`)
const out: MemoryResult = { store: name, identities: n, bytesPerIdentity: (after - before) / n }
process.stdout.write(JSON.stringify(out) + '\n')
// Keep both stores alive until the last reading.
if (store.size() > 1 || measured.size() !== n) process.exitCode = 1
