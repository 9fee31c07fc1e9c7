import type { Kernel, Outcome, Penalty, Policy } from './types.js'

/** A penalized state: the algorithm's own, and the block — until when, after how many refusals in a row. */
export interface PenalizedState {
  readonly inner: unknown
  readonly blockedUntil: number
  readonly strikes: number
}

/** Refusals in a row counted at most: `double` reaches any bound well before (2^63 × 1 ms). */
export const MAX_STRIKES = 64

/** How long the `strikes`-th refusal in a row blocks, from it (ms). */
export function blockMs (penalty: Penalty, windowMs: number, strikes: number): number {
  if (penalty.mode === 'restart') return windowMs
  // windowMs × 2^(k-1) below maxMs is exact (a safe integer); above it, maxMs.
  const doubled = windowMs * 2 ** (strikes - 1)
  return doubled < penalty.maxMs ? doubled : penalty.maxMs
}

/** The longest block the penalty sets (ms): what a stored block may lie ahead of now. */
export function longestBlockMs (penalty: Penalty, windowMs: number): number {
  return penalty.mode === 'restart' ? windowMs : penalty.maxMs
}

/**
 * An algorithm with a penalty, as a kernel of its own: its state is the algorithm's, then the
 * block (`blockedUntil`, `strikes`: two more fields). While blocked (`now < blockedUntil`) every
 * request is refused, the algorithm's state is left as it was (nothing consumed, nothing stored
 * from the look), and the block grows by the penalty; otherwise the algorithm decides, and a
 * refusal starts a block of at least the algorithm's own wait. The wait said is the block's end,
 * or later when the algorithm needs longer for that cost — so a client that comes back then with
 * the same cost is admitted if nothing else consumed (its block ended; the algorithm recovered).
 * An admission forgets the block.
 */
export function withPenalty (kernel: Kernel<unknown>, penalty: Penalty): Kernel<PenalizedState> {
  const fields = kernel.fields
  const blocked = (inner: unknown, policy: Policy, now: number, cost: number, until: number, strikes: number): Outcome<PenalizedState> => {
    const look = kernel.consume(inner, policy, now, cost)
    const end = look.allowed ? until : Math.max(until, now + look.retryAfterMs)
    return {
      allowed: false,
      remaining: 0,
      retryAfterMs: end - now,
      // The quota's own full tick as it stands (a cost-0 look stores and takes nothing): exact also
      // for a quota already full on a clock that stepped back, which recoversAt puts at its ticks.
      resetAt: Math.max(end, kernel.consume(inner, policy, now, 0).resetAt),
      // A unit comes back when the block ends, or later when the quota has none then. A look
      // that passed had one; a refused look stored nothing, so its numbers are the quota's as it stands.
      moreAt: look.allowed || look.remaining > 0 ? until : Math.max(until, look.moreAt),
      state: { inner, blockedUntil: until, strikes }
    }
  }
  return {
    fields: fields + 2,
    fresh: (policy, now) => ({ inner: kernel.fresh(policy, now), blockedUntil: 0, strikes: 0 }),
    consume (state, policy, now, cost) {
      if (now < state.blockedUntil) {
        const strikes = Math.min(MAX_STRIKES, state.strikes + 1)
        return blocked(state.inner, policy, now, cost, Math.max(state.blockedUntil, now + blockMs(penalty, policy.windowMs, strikes)), strikes)
      }
      const outcome = kernel.consume(state.inner, policy, now, cost)
      if (outcome.allowed) return { ...outcome, state: { inner: outcome.state, blockedUntil: 0, strikes: 0 } }
      return blocked(outcome.state, policy, now, cost, now + Math.max(outcome.retryAfterMs, blockMs(penalty, policy.windowMs, 1)), 1)
    },
    // A charge is not a refusal: it moves the algorithm's state and leaves the block as it is;
    // while the block lasts, a cost-1 request is refused until its end (or later, as above).
    charge (state, policy, now, units) {
      const outcome = kernel.charge(state.inner, policy, now, units)
      const { blockedUntil: until, strikes } = state
      if (now >= until) return { ...outcome, state: { inner: outcome.state, blockedUntil: until, strikes } }
      return {
        allowed: false,
        remaining: 0,
        retryAfterMs: Math.max(until, now + outcome.retryAfterMs) - now,
        resetAt: Math.max(outcome.resetAt, until),
        moreAt: outcome.remaining > 0 ? until : Math.max(until, outcome.moreAt),
        state: { inner: outcome.state, blockedUntil: until, strikes }
      }
    },
    recoversAt: (state, policy) => Math.max(kernel.recoversAt(state.inner, policy), state.blockedUntil),
    write (state, row, base) {
      kernel.write(state.inner, row, base)
      row[base + fields] = state.blockedUntil
      row[base + fields + 1] = state.strikes
    },
    read: (row, base) => ({ inner: kernel.read(row, base), blockedUntil: row[base + fields] as number, strikes: row[base + fields + 1] as number })
  }
}
