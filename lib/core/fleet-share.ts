/**
 * One process's share of an in-flight limit kept for a whole fleet (`maxInFlight: { fleet }`):
 * the fleet's `limit` split over its `members` live processes, the remainder one each to the
 * members ranked first (`rank` from 0, by a name every member sorts alike), so the shares of one
 * view of the membership add up to the limit exactly. Every member keeps at least one slot: a
 * process that may serve nothing would answer every request it is sent with a 503, so a fleet of
 * more members than its limit holds one per member.
 */
export function fleetShare (limit: number, members: number, rank: number): number {
  const base = Math.floor(limit / members)
  return Math.max(1, rank < limit % members ? base + 1 : base)
}

/** What a member keeps between refreshes of its fleet: its share, the members it saw, when they last shrank (ms). */
export interface HeldShare {
  readonly share: number
  readonly members: number
  readonly shrankAt: number
}

/**
 * The share a member takes after a refresh at `now` that computed `share` for `members` live
 * members. A member never raises its share before the shares it takes them from have lapsed: when
 * the fleet it sees shrinks — a member left or died, or Redis restarted empty and the others have
 * not renewed yet — it keeps its share until `ttlMs` after the shrink, by when every member still
 * alive has renewed (a TTL is several refreshes) and a dead one's entry is gone. A lower share is
 * taken at once; the first view (from the one slot held before it) is taken as it comes.
 */
export function heldShare (previous: HeldShare | undefined, share: number, members: number, now: number, ttlMs: number): HeldShare {
  if (previous === undefined) return { share, members, shrankAt: -Infinity }
  const shrankAt = members < previous.members ? now : previous.shrankAt
  const held = share > previous.share && now - shrankAt < ttlMs ? previous.share : share
  return { share: held, members, shrankAt }
}
