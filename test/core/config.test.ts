import t from 'tap'
import fc from 'fast-check'
import { limitConfig, LIM_ERR_OK, LIM_ERR_PARAM } from '../../lib/core/index.js'

t.test('error codes are the seed\'s 0 and 1', async (t) => {
  t.equal(LIM_ERR_OK, 0)
  t.equal(LIM_ERR_PARAM, 1)
})

t.test('all four positive: ok, err 0, values kept', async (t) => {
  t.same(limitConfig(10, 2, 1000, 5), { ok: true, err: 0, capacity: 10, refill: 2, interval: 1000, maxInFlight: 5 })
  t.same(limitConfig(1, 1, 1, 1), { ok: true, err: 0, capacity: 1, refill: 1, interval: 1, maxInFlight: 1 })
  t.equal(limitConfig(Number.MAX_SAFE_INTEGER, 1, 1, 1).ok, true)
})

t.test('each parameter <= 0 is LIM_ERR_PARAM', async (t) => {
  for (const bad of [0, -1, -0, -1e6]) {
    for (let i = 0; i < 4; i++) {
      const args: [number, number, number, number] = [10, 2, 1000, 5]
      args[i] = bad
      const c = limitConfig(...args)
      t.equal(c.ok, false, `arg ${i} = ${bad}`)
      t.equal(c.err, LIM_ERR_PARAM, `arg ${i} = ${bad}`)
    }
  }
})

t.test('fractions, NaN, infinities and unsafe integers are LIM_ERR_PARAM', async (t) => {
  for (const bad of [0.5, 1.5, NaN, Infinity, -Infinity, Number.MAX_SAFE_INTEGER + 1, 2 ** 60]) {
    for (let i = 0; i < 4; i++) {
      const args: [number, number, number, number] = [10, 2, 1000, 5]
      args[i] = bad
      t.same(limitConfig(...args).err, LIM_ERR_PARAM, `arg ${i} = ${bad}`)
    }
  }
})

t.test('property: ok iff all four are positive safe integers, err matches ok', async (t) => {
  const param = fc.oneof(fc.integer({ min: -1e6, max: 1e6 }), fc.double(), fc.constantFrom(0, 1, NaN, Infinity))
  fc.assert(fc.property(param, param, param, param, (a, b, c, d) => {
    const cfg = limitConfig(a, b, c, d)
    const expected = [a, b, c, d].every((v) => Number.isSafeInteger(v) && v > 0)
    return cfg.ok === expected && cfg.err === (expected ? 0 : 1) &&
      Object.is(cfg.capacity, a) && Object.is(cfg.refill, b) && Object.is(cfg.interval, c) && Object.is(cfg.maxInFlight, d)
  }))
  t.pass('holds')
})
