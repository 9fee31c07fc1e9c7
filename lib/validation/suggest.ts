/**
 * The edit distance of two strings (optimal string alignment: insertions, deletions,
 * substitutions and swaps of two neighbours, one each), stopping early above `most`.
 */
export function editDistance (a: string, b: string, most = Infinity): number {
  if (Math.abs(a.length - b.length) > most) return most + 1
  let before: number[] = []
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const row = [i]
    let least = i
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let d = Math.min(previous[j]! + 1, row[j - 1]! + 1, previous[j - 1]! + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, before[j - 2]! + 1)
      row.push(d)
      least = Math.min(least, d)
    }
    if (least > most) return most + 1
    before = previous
    previous = row
  }
  return previous[b.length]!
}

/**
 * The known name `given` is most likely a typo of (`maxInflight` → `maxInFlight`, `ratelimit` →
 * `rateLimit`), or undefined: letter case is not counted, and a name may be off by one edit (two
 * for names of six letters or more). The first of the nearest, in `known`'s order.
 */
export function nearest (given: string, known: readonly string[]): string | undefined {
  const lower = given.toLowerCase()
  const most = lower.length >= 6 ? 2 : 1
  let best: string | undefined
  let bestDistance = most + 1
  for (const name of known) {
    const distance = editDistance(lower, name.toLowerCase(), most)
    if (distance < bestDistance) {
      best = name
      bestDistance = distance
    }
  }
  return best
}
