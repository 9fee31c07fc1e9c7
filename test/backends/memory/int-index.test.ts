import t from 'tap'
import fc from 'fast-check'
import { IntIndex } from '../../../lib/backends/memory/int-index.js'

const home = (key: number, capacity: number): number => Math.imul(key, 0x9e3779b1) >>> (32 - Math.log2(capacity))

/** `n` keys whose home in a table of `capacity` is `at`: they collide, in one run. */
function collidingAt (at: number, n: number, capacity = 1024): number[] {
  const keys: number[] = []
  for (let k = 0; keys.length < n; k++) if (home(k, capacity) === at) keys.push(k)
  return keys
}

type Op = { kind: 'set' | 'delete' | 'get', key: number } | { kind: 'removeWhere', modulo: number }

/** Runs `ops` on an index and on a Map, and says where they first differ. */
function differs (ops: readonly Op[]): string | undefined {
  const index = new IntIndex()
  const model = new Map<number, number>()
  let nextSlot = 0
  for (const [i, op] of ops.entries()) {
    const at = `op ${i} ${JSON.stringify(op)}`
    if (op.kind === 'set') {
      if (model.has(op.key)) continue // the caller looks first
      index.set(op.key, nextSlot)
      model.set(op.key, nextSlot++)
    } else if (op.kind === 'delete') {
      const got = index.delete(op.key)
      const want = model.get(op.key) ?? -1
      model.delete(op.key)
      if (got !== want) return `${at}: delete gave ${got}, expected ${want}`
    } else if (op.kind === 'get') {
      const got = index.get(op.key)
      if (got !== (model.get(op.key) ?? -1)) return `${at}: get gave ${got}`
    } else {
      const modulo = (op as { modulo: number }).modulo
      const seen: number[] = []
      index.removeWhere((slot) => { seen.push(slot); return slot % modulo === 0 })
      if (seen.length !== model.size || new Set(seen).size !== seen.length) return `${at}: saw ${seen.length} of ${model.size}`
      for (const [k, slot] of model) if (slot % modulo === 0) model.delete(k)
    }
    if (index.size !== model.size) return `${at}: size ${index.size}, expected ${model.size}`
  }
  for (const [k, slot] of model) if (index.get(k) !== slot) return `at the end: ${k} → ${index.get(k)}, expected ${slot}`
  return undefined
}

t.test('runs that wrap past the end of the table: found, deleted from the middle, shifted back', async (t) => {
  const tail = collidingAt(1023, 6)
  const head = collidingAt(0, 3)
  const ops: Op[] = [...tail, ...head].map((key) => ({ kind: 'set', key }))
  for (const key of [tail[2]!, head[0]!, tail[0]!]) ops.push({ kind: 'delete', key })
  for (const key of [...tail, ...head, 12345]) ops.push({ kind: 'get', key })
  for (const key of [...tail, ...head]) ops.push({ kind: 'delete', key })
  t.equal(differs(ops), undefined)
  // An entry whose home is after the hole (it wrapped) is not moved before its home.
  const index = new IntIndex()
  const a = collidingAt(1022, 1)[0]!
  const b = collidingAt(1023, 2)
  index.set(a, 0); index.set(b[0]!, 1); index.set(b[1]!, 2) // positions 1022, 1023, 0
  t.equal(index.delete(a), 0)
  t.equal(index.get(b[0]!), 1)
  t.equal(index.get(b[1]!), 2)
  t.equal(index.delete(a), -1, 'a key deleted twice is not there')
  t.equal(index.size, 2)
})

t.test('grows past 3/4 of its positions and keeps every entry', async (t) => {
  const index = new IntIndex()
  for (let k = 0; k < 5000; k++) index.set(k * 7919, k)
  t.equal(index.size, 5000)
  let wrong = 0
  for (let k = 0; k < 5000; k++) if (index.get(k * 7919) !== k) wrong++
  t.equal(wrong, 0)
  t.equal(index.get(-1), -1)
})

t.test('property: the index answers as a Map would, through sets, deletes, sweeps and growth', async (t) => {
  // A small pool makes collisions, deletes of present keys and re-adds common; the wide range
  // covers negative keys (addresses from 128.0.0.0 up).
  const key = fc.oneof(fc.integer({ min: 0, max: 40 }), fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), fc.constantFrom(...collidingAt(1023, 4), ...collidingAt(0, 2)))
  const op: fc.Arbitrary<Op> = fc.oneof(
    { arbitrary: fc.record({ kind: fc.constant('set' as const), key }), weight: 5 },
    { arbitrary: fc.record({ kind: fc.constant('delete' as const), key }), weight: 3 },
    { arbitrary: fc.record({ kind: fc.constant('get' as const), key }), weight: 2 },
    { arbitrary: fc.record({ kind: fc.constant('removeWhere' as const), modulo: fc.integer({ min: 1, max: 4 }) }), weight: 1 }
  )
  fc.assert(fc.property(fc.array(op, { maxLength: 300 }), (ops) => differs(ops) === undefined), { numRuns: 500 })
  // And through growth: a thousand keys first.
  fc.assert(fc.property(fc.array(op, { maxLength: 200 }), (ops) => {
    const fill: Op[] = Array.from({ length: 1000 }, (_, i) => ({ kind: 'set', key: i * 104729 }))
    return differs([...fill, ...ops]) === undefined
  }), { numRuns: 50 })
})
