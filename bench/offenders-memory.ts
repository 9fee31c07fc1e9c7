// The offenders sketch's memory after `n` distinct refused keys over a minute:
// `node --expose-gc --import tsx bench/offenders-memory.ts [n] [address|long] [top] [sketches]`.
// Prints one JSON line: the keys the sketch holds and the bytes of heap and array buffers it
// holds. `address`: keys as the default key makes them (IPv4 addresses, a fresh string each, as
// `request.ip` is per connection); `long`: keys of the longest length a `key` function may return
// (1024 bytes), the worst case per key held. `sketches` (default 10) are measured at once and the
// difference divided among them: one sketch's ~100 KB is within the noise of a single reading.
import { Buffer } from 'node:buffer'
import type { HeavyHitters } from '../lib/core/heavy-hitters.js'
import { offendersSketch } from '../lib/gate/offenders.js'
import { used } from './heap.js'

const [nArg = '1000000', kind = 'address', topArg = '20', sketchesArg = '10'] = process.argv.slice(2)
const n = Number(nArg)
const top = Number(topArg)
const sketches = Number(sketchesArg)
// A long key is made from bytes, so that each is a flat string of its own (`padEnd` or `repeat`
// would share their filler between keys, and measure less than a key of the application holds).
const keyOf = kind === 'long'
  ? (i: number): string => Buffer.alloc(1024, `${i}:`).toString('latin1')
  : (i: number): string => `${(i >>> 24) & 255}.${(i >>> 16) & 255}.${(i >>> 8) & 255}.${i & 255}`

/** A sketch fed `n` distinct keys spread over a minute (a new set of keys for each `round`). */
function fed (round: number): HeavyHitters {
  const sketch = offendersSketch(top)
  for (let i = 0; i < n; i++) sketch.add(keyOf(round * n + i), Math.floor((i * 60_000) / n))
  return sketch
}

// A whole run first, then dropped: what the code allocates once (compiled code, caches) is in
// both readings.
fed(sketches)
const before = used()
const kept: HeavyHitters[] = []
for (let round = 0; round < sketches; round++) kept.push(fed(round))
const after = used()
process.stdout.write(JSON.stringify({ keys: n, kind, top, held: kept[0]!.held, bytes: Math.round((after - before) / sketches) }) + '\n')
