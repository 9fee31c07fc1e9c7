// The heavy-hitters sketch: Space-Saving's guarantees in each slice and over the merged window —
// every key seen more than 1/m of a slice is held, a count is never below the truth, and `count -
// error` never above it — and memory bounded by the counters whatever the number of distinct keys.
import t from 'tap'
import fc from 'fast-check'
import { HeavyHitters } from '../../lib/core/heavy-hitters.js'

const SLICE = 10_000

/** Every key the window holds at `now`, by key. */
function everything (sketch: HeavyHitters, now: number): Map<string, { count: number, error: number }> {
  return new Map(sketch.top(Infinity, now).map(({ key, count, error }) => [key, { count, error }]))
}

/** Skewed streams over a small universe: a few keys come often, many once or twice. */
const stream = fc.array(fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 4 }) },
  { weight: 2, arbitrary: fc.integer({ min: 5, max: 400 }) }
).map((n) => `k${n}`), { minLength: 1, maxLength: 800 })

t.test('one slice: a key seen more than N/m times is held; count ≥ truth ≥ count - error; error ≤ N/m', async (t) => {
  fc.assert(fc.property(stream, fc.integer({ min: 1, max: 40 }), (keys, counters) => {
    const sketch = new HeavyHitters({ counters, sliceMs: SLICE, slices: 6 })
    const truth = new Map<string, number>()
    for (const key of keys) {
      sketch.add(key, 0)
      truth.set(key, (truth.get(key) ?? 0) + 1)
    }
    const held = everything(sketch, 0)
    const n = keys.length
    if (held.size > counters || sketch.held !== held.size) return false
    for (const [key, count] of truth) if (count > n / counters && !held.has(key)) return false
    for (const [key, { count, error }] of held) {
      const seen = truth.get(key)!
      if (count < seen || count - error > seen || error > n / counters) return false
    }
    return true
  }), { numRuns: 300 })
})

t.test('the window: slices merged, bounds kept; what left the window is not counted', async (t) => {
  const timed = fc.array(fc.tuple(stream.map((keys) => keys[0]!), fc.integer({ min: 0, max: 3 })), { minLength: 1, maxLength: 1500 })
  fc.assert(fc.property(timed, fc.integer({ min: 2, max: 30 }), fc.integer({ min: 2, max: 6 }), (events, counters, slices) => {
    const sketch = new HeavyHitters({ counters, sliceMs: SLICE, slices })
    // Time moves on by 0 to 3 thousand ms between keys, so a long stream crosses many slices.
    let now = 0
    const timedKeys: Array<{ key: string, epoch: number }> = []
    for (const [key, step] of events) {
      now += step * 1000
      sketch.add(key, now)
      timedKeys.push({ key, epoch: Math.floor(now / SLICE) })
    }
    const latest = Math.floor(now / SLICE)
    const live = timedKeys.filter(({ epoch }) => epoch > latest - slices)
    const truth = new Map<string, number>()
    const perSlice = new Map<number, Map<string, number>>()
    for (const { key, epoch } of live) {
      truth.set(key, (truth.get(key) ?? 0) + 1)
      const slice = perSlice.get(epoch) ?? new Map<string, number>()
      perSlice.set(epoch, slice.set(key, (slice.get(key) ?? 0) + 1))
    }
    const held = everything(sketch, now)
    for (const [key, { count, error }] of held) {
      const seen = truth.get(key) ?? 0
      if (seen === 0 || count < seen || count - error > seen) return false
    }
    // A key seen more than 1/m of some live slice is held.
    for (const slice of perSlice.values()) {
      const n = [...slice.values()].reduce((a, b) => a + b, 0)
      for (const [key, count] of slice) if (count > n / counters && !held.has(key)) return false
    }
    return sketch.held <= counters * slices
  }), { numRuns: 200 })
})

t.test('counts leave the window slice by slice; a clock that steps back counts into the latest slice', async (t) => {
  const sketch = new HeavyHitters({ counters: 4, sliceMs: SLICE, slices: 3 })
  sketch.add('a', 0)
  sketch.add('a', 0)
  sketch.add('b', 10_000)
  t.same(sketch.top(5, 20_000), [{ key: 'a', count: 2, error: 0 }, { key: 'b', count: 1, error: 0 }], 'the current slice and the two before it')
  t.same(sketch.top(5, 30_000), [{ key: 'b', count: 1, error: 0 }], 'the first slice has left the window')
  sketch.add('c', 5_000)
  t.same(sketch.top(5, 30_000), [{ key: 'b', count: 1, error: 0 }, { key: 'c', count: 1, error: 0 }], 'counted at 30 s, the latest time seen')
  t.same(sketch.top(5, 0), sketch.top(5, 30_000), 'read back in time: the window of the latest time seen')
  t.same(sketch.top(1, 30_000), [{ key: 'b', count: 1, error: 0 }], 'equal counts: by key')
  t.same(sketch.top(5, 60_000), [], 'all gone after the window')
  t.equal(sketch.held, 2, 'a slice is emptied when time comes back to it, not before')
  sketch.add('d', 60_000)
  t.equal(sketch.held, 2, 'the slice reused is emptied first')
  const early = new HeavyHitters({ counters: 2, sliceMs: SLICE, slices: 2 })
  early.add('x', -1)
  t.same(early.top(1, 0), [{ key: 'x', count: 1, error: 0 }], 'a time before 0 counts into the first slice')
})

t.test('a full slice: a key it does not hold may have had its least count there (an upper bound)', async (t) => {
  const sketch = new HeavyHitters({ counters: 2, sliceMs: SLICE, slices: 2 })
  // Slice 0: a ×3, b ×2, then c takes b's counter (count 3, error 2).
  for (const key of ['a', 'a', 'a', 'b', 'b', 'c']) sketch.add(key, 0)
  // Slice 1: b ×1 (not full: keys it does not hold had 0 there).
  sketch.add('b', SLICE)
  t.same(sketch.top(5, SLICE), [
    { key: 'a', count: 3, error: 0 },
    { key: 'b', count: 4, error: 3 },
    { key: 'c', count: 3, error: 2 }
  ], 'b: 1 in slice 1, and at most 3 in slice 0 (its least count); seen at least once')
})

t.test('1,000,000 distinct keys: the sketch holds at most slices × counters, and the heavy keys are its top', async (t) => {
  const counters = 100
  const slices = 6
  const sketch = new HeavyHitters({ counters, sliceMs: SLICE, slices })
  const heavy = ['heavy-1', 'heavy-2', 'heavy-3']
  const truth = new Map<string, number>()
  // Over a minute: a distinct key per step, and every 10th step one of the heavy keys (each about
  // 3 % of the stream: more than 1/m of every slice).
  const n = 1_000_000
  const end = 60_000
  for (let i = 0; i < n; i++) {
    const now = Math.floor((i * end) / n)
    sketch.add(`10.${(i >>> 16) & 255}.${(i >>> 8) & 255}.${i & 255}/${i >>> 24}`, now)
    if (i % 10 !== 0) continue
    const key = heavy[(i / 10) % heavy.length]!
    sketch.add(key, now)
    // What the window read at `end` covers: the slices after the first.
    if (now >= SLICE) truth.set(key, (truth.get(key) ?? 0) + 1)
  }
  t.ok(sketch.held <= counters * slices, `${sketch.held} keys held (at most ${counters * slices})`)
  const top = sketch.top(3, end)
  t.same(top.map(({ key }) => key).sort(), heavy, 'the three heavy keys')
  for (const { key, count, error } of top) {
    const seen = truth.get(key)!
    t.ok(count >= seen && count - error <= seen, `${key}: ${seen} in the window, counted ${count - error} to ${count}`)
  }
})
