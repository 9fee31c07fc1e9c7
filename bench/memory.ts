// Bytes per live identity: `node --expose-gc --import tsx bench/memory.ts <admission|local-store> [n]`.
// Prints one JSON line (MemoryResult).
import { createRequire } from 'node:module'
import { tokenBucketLimiter } from './limiter.js'

export interface MemoryResult {
  store: string
  identities: number
  /** Registry only: the key strings exist (and stay alive) before the first reading. */
  bytesPerIdentity: number
  /** Registry and its key strings. */
  bytesPerIdentityWithKeys: number
  /** The key strings alone. */
  bytesPerKey: number
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

const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error('run with node --expose-gc')

function used (): number {
  gc!(); gc!()
  const m = process.memoryUsage()
  return m.heapUsed + m.arrayBuffers
}

const [name = 'admission', nArg = '1000000'] = process.argv.slice(2)
const n = Number(nArg)
const bare = used()
const keys: string[] = new Array<string>(n)
for (let i = 0; i < n; i++) keys[i] = `${(i >>> 24) & 255}.${(i >>> 16) & 255}.${(i >>> 8) & 255}.${i & 255}`
// Flatten and hash every key now, so the registry's reading below does not include that work.
new Set(keys).clear()
const before = used()
const store = storeOf(name, n)
for (let i = 0; i < n; i++) store.add(keys[i]!)
const after = used()
if (store.size() !== n) throw new Error(`${name}: ${store.size()} identities, expected ${n}`)
const out: MemoryResult = {
  store: name,
  identities: n,
  bytesPerIdentity: (after - before) / n,
  bytesPerIdentityWithKeys: (after - bare) / n,
  bytesPerKey: (before - bare) / n
}
process.stdout.write(JSON.stringify(out) + '\n')
// Keep the keys alive until the last reading.
if (keys.length !== n) process.exitCode = 1
