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

t.test('a share is never raised before the shares it takes from have lapsed', async (t) => {
  const { heldShare } = await import('../../lib/core/fleet-share.js')
  const ttl = 150
  const first = heldShare(undefined, 1, 10, 0, ttl)
  t.same(first, { share: 1, members: 10, shrankAt: -Infinity }, 'the first view is taken as it comes')
  // Redis restarted empty: this member renews first and sees itself alone (a share of 8 of 8).
  const alone = heldShare(first, 8, 1, 1000, ttl)
  t.equal(alone.share, 1, 'kept while the others have not renewed')
  const second = heldShare(alone, 4, 2, 1050, ttl)
  t.equal(second.share, 1, 'still kept: the fleet is still growing back')
  const back = heldShare(second, 1, 10, 1100, ttl)
  t.same(back, { share: 1, members: 10, shrankAt: 1000 }, 'every member renewed: the same share as before')
  // A member died for good: the rest take its part once its entry has lapsed.
  const died = heldShare(back, 2, 9, 2000, ttl)
  t.equal(died.share, 1, 'kept within the TTL')
  t.equal(heldShare(died, 2, 9, 2000 + ttl - 1, ttl).share, 1)
  t.equal(heldShare(died, 2, 9, 2000 + ttl, ttl).share, 2, 'raised once the TTL has passed since the shrink')
  t.equal(heldShare({ share: 5, members: 2, shrankAt: -Infinity }, 3, 3, 10, ttl).share, 3, 'a lower share at once')
})

t.test('property: through a restart and deaths, the live members\' shares never add up to more than the limit', async (t) => {
  const { heldShare } = await import('../../lib/core/fleet-share.js')
  fc.assert(fc.property(fc.integer({ min: 1, max: 64 }), fc.integer({ min: 2, max: 12 }), fc.array(fc.nat({ max: 11 }), { minLength: 1, maxLength: 40 }), fc.integer({ min: 0, max: 11 }),
    (limit, size, order, deaths) => {
      const ttl = 300
      const refresh = 100
      // Each member renews every `refresh` ms; the store keeps the names renewed within the TTL.
      const alive = Array.from({ length: size }, (_, i) => i)
      const renewed = new Map<number, number>()
      const held = new Map<number, ReturnType<typeof heldShare>>()
      let now = 0
      const view = (member: number): void => {
        renewed.set(member, now)
        const live = [...renewed].filter(([, at]) => now - at < ttl).map(([m]) => m).sort((a, b) => a - b)
        held.set(member, heldShare(held.get(member), fleetShare(limit, live.length, live.indexOf(member)), live.length, now, ttl))
      }
      for (let round = 0; round < 5; round++, now += refresh) for (const m of alive) view(m)
      const fair = alive.reduce((sum, m) => sum + held.get(m)!.share, 0)
      if (fair > Math.max(limit, size)) return false
      renewed.clear() // Redis restarted empty
      alive.splice(0, Math.min(deaths, size - 1)).forEach((m) => held.delete(m))
      for (const step of order) {
        now += 7
        view(alive[step % alive.length]!)
        const total = alive.reduce((sum, m) => sum + (held.get(m)?.share ?? 0), 0)
        if (total > Math.max(limit, size)) return false
      }
      return true
    }), { numRuns: 300 })
  t.pass()
})
