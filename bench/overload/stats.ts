// Percentiles and spreads for the overload benchmark.

/** Nearest-rank quantile (q in 0..1) of the values; NaN when there are none. */
export function quantile (values: ArrayLike<number>, q: number): number {
  if (values.length === 0) return Number.NaN
  const sorted = Float64Array.from(values).sort()
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))
  return sorted[rank]!
}

export interface Spread { median: number, min: number, max: number }

/** Median and min–max of the repeats' values, NaNs (no sample) left out. */
export function spread (values: readonly number[]): Spread {
  const v = values.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b)
  if (v.length === 0) return { median: Number.NaN, min: Number.NaN, max: Number.NaN }
  const mid = v.length >> 1
  return { median: v.length % 2 === 1 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2, min: v[0]!, max: v[v.length - 1]! }
}

/** For latencies: a repeat without a sample (no such answer at all) counts against the median, so
 * unless most repeats have samples there is no median (one lucky repeat of three is not a p99). */
export function latencySpread (values: readonly number[]): Spread {
  const finite = values.filter((x) => typeof x === 'number' && Number.isFinite(x)).length
  return finite * 2 > values.length ? spread(values) : { median: Number.NaN, min: Number.NaN, max: Number.NaN }
}
