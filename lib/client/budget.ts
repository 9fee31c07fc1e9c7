/**
 * A retry budget per origin, Finagle's `RetryBudget` in integers: over a sliding window
 * (`windowMs`, ten slices), the retries sent may be at most `ratio` of the requests sent (first
 * attempts), or `minPerSecond` a second over the window when that is more — so a client that has
 * just started, or sends little, can still retry. Finagle adds the two; here the minimum is a
 * floor, so that under load retries stay within the ratio itself. State is a value: each function
 * returns the next state, the caller stores it.
 */
export interface BudgetConfig {
  /** Retries per 1000 requests (the ratio × 1000, an integer). */
  readonly perMille: number
  /** Retries a second allowed whatever the requests, over the window. */
  readonly minPerSecond: number
  /** The window, in ms (a whole number of seconds). */
  readonly windowMs: number
}

export interface BudgetState {
  /** The index of the newest slice: `floor(now × SLICES / windowMs)`. */
  readonly slice: number
  /** Requests counted in each slice, oldest first. */
  readonly requests: readonly number[]
  /** Retries counted in each slice, oldest first. */
  readonly retries: readonly number[]
}

export const SLICES = 10

const ZEROS: readonly number[] = Array.from({ length: SLICES }, () => 0)

export function newBudget (): BudgetState {
  return { slice: 0, requests: ZEROS, retries: ZEROS }
}

/** The state at `now`: slices older than the window dropped. A clock that steps back counts into the newest slice. */
export function advance (state: BudgetState, config: BudgetConfig, now: number): BudgetState {
  const slice = Math.floor(now * SLICES / config.windowMs)
  const shift = Math.min(SLICES, slice - state.slice)
  if (shift <= 0) return state
  return {
    slice,
    requests: [...state.requests.slice(shift), ...ZEROS.slice(0, shift)],
    retries: [...state.retries.slice(shift), ...ZEROS.slice(0, shift)]
  }
}

function plusNewest (counts: readonly number[]): number[] {
  const next = [...counts]
  next[SLICES - 1] = next[SLICES - 1]! + 1
  return next
}

const sum = (counts: readonly number[]): number => counts.reduce((a, b) => a + b, 0)

/** A request (a first attempt) was sent: it earns `ratio` of a retry. */
export function recordRequest (state: BudgetState, config: BudgetConfig, now: number): BudgetState {
  const current = advance(state, config, now)
  return { ...current, requests: plusNewest(current.requests) }
}

/** The retries the window allows now, in thousandths of a retry. */
export function allowance (state: BudgetState, config: BudgetConfig): number {
  return Math.max(config.minPerSecond * config.windowMs, sum(state.requests) * config.perMille)
}

/** A retry, if the budget has room for one more: `ok` and the state with it counted; else `ok: false` and the state unspent. */
export function withdrawRetry (state: BudgetState, config: BudgetConfig, now: number): { readonly ok: boolean, readonly state: BudgetState } {
  const current = advance(state, config, now)
  if ((sum(current.retries) + 1) * 1000 > allowance(current, config)) return { ok: false, state: current }
  return { ok: true, state: { ...current, retries: plusNewest(current.retries) } }
}
