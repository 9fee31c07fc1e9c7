/**
 * Full jitter (the AWS architecture blog's "Exponential Backoff And Jitter"): the delay before
 * retry `retry` (1 for the first retry) is uniform in [0, min(capMs, baseMs × 2^(retry − 1))],
 * whole ms. Clients refused together come back spread over the whole interval, not in a wave.
 * `random` is a draw in [0, 1); anything outside is clamped into the interval.
 */
export function fullJitter (retry: number, baseMs: number, capMs: number, random: number): number {
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.min(Math.max(retry - 1, 0), 40))
  const draw = Math.floor(random * (ceiling + 1))
  return Math.min(ceiling, Math.max(0, Number.isNaN(draw) ? 0 : draw))
}
