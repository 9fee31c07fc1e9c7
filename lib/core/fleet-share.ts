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
