import t from 'tap'
import fc from 'fast-check'
import { acquire, release } from '../../lib/core/index.js'

t.test('acquire: n + 1 <= max takes a slot, otherwise sheds and leaves n', async (t) => {
  t.same(acquire(0, 1), { ok: true, n: 1 })
  t.same(acquire(1, 1), { ok: false, n: 1 })
  t.same(acquire(3, 5), { ok: true, n: 4 })
  t.same(acquire(4, 5), { ok: true, n: 5 })
  t.same(acquire(5, 5), { ok: false, n: 5 })
  t.same(acquire(7, 5), { ok: false, n: 7 })
})

t.test('release: n - 1, never below 0', async (t) => {
  t.equal(release(3), 2)
  t.equal(release(1), 0)
  t.equal(release(0), 0)
  t.equal(release(-4), 0)
})

t.test('property: release never goes below 0', async (t) => {
  fc.assert(fc.property(fc.integer({ min: -1e9, max: 1e9 }), (n) => {
    const r = release(n)
    return r >= 0 && r === Math.max(0, n - 1)
  }))
  t.pass('holds')
})

t.test('property: acquire/release sequences keep 0 <= n <= max and match a counter', async (t) => {
  fc.assert(fc.property(fc.integer({ min: 1, max: 20 }), fc.array(fc.boolean(), { maxLength: 200 }), (max, ops) => {
    let n = 0
    let model = 0
    for (const isAcquire of ops) {
      if (isAcquire) {
        const r = acquire(n, max)
        if (r.ok !== model < max) return false
        if (r.ok) model++
        n = r.n
      } else {
        n = release(n)
        model = Math.max(0, model - 1)
      }
      if (n !== model || n < 0 || n > max) return false
    }
    return true
  }))
  t.pass('holds')
})
