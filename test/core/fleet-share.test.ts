// A fleet's in-flight limit split over its live members: the shares of one view add up to the
// limit exactly (or one slot per member, when there are more members than the limit), and no two
// members' shares differ by more than one.
import t from 'tap'
import fc from 'fast-check'
import { fleetShare } from '../../lib/core/index.js'

t.test('the shares of one view add up to max(limit, members); none differs from another by more than one', async (t) => {
  fc.assert(fc.property(fc.integer({ min: 1, max: 100_000 }), fc.integer({ min: 1, max: 500 }), (limit, members) => {
    const shares = Array.from({ length: members }, (_, rank) => fleetShare(limit, members, rank))
    const total = shares.reduce((a, b) => a + b, 0)
    return total === Math.max(limit, members) && Math.max(...shares) - Math.min(...shares) <= 1 && shares.every((s) => s >= 1)
  }), { numRuns: 500 })
  t.same([0, 1, 2].map((rank) => fleetShare(10, 3, rank)), [4, 3, 3], 'the remainder to the first ranked')
  t.same([0, 1, 2].map((rank) => fleetShare(2, 3, rank)), [1, 1, 1], 'more members than the limit: one each')
  t.equal(fleetShare(400, 1, 0), 400, 'alone: the whole limit')
})
