import { ceilDiv } from '../../core/rates/arithmetic.js'
import { kernelFor, kernelOf, longestBlockMs, MAX_STRIKES, type Policy } from '../../core/rates/index.js'
import { RatesPolicyConflictError, RatesUnavailableError } from '../../rates/errors.js'
import { capacityOf, chargeProblem, policyOfFingerprint } from '../../rates/policy.js'

/**
 * A stored value as the decision script reads it, in TypeScript: the twin of the script's
 * validation (`decide-script.ts`, "Validation"), line for line, so that a differential test can
 * hold the Lua to it for any string a key may hold. Pure functions; the backend's `state()` reads
 * with it too.
 *
 * The rule: a stored value `<fingerprint> <n1> [<n2> [<n3>]]` (then `<blockedUntil> <strikes>`
 * for a policy with a penalty) with the caller's fingerprint is
 * trusted only if its fields are canonical decimal integers (at most 16 digits), as many as the
 * algorithm's kernel has, each in range for the policy at the server's time `now`; R being the
 * policy's worst recovery time (`recoveryMs()`), a time field may lie up to R in the future (a
 * server clock that stepped back by up to R). Any other value is decided as the worst state a
 * client can legitimately be in at `now` (`worstState()`): never a silent reset, and a lock of at
 * most R.
 */

/** What the script reads from a stored value. */
export type StoredRead =
  /** Another fingerprint (or none): a conflict, the value left as it is. */
  | { readonly kind: 'conflict', readonly fingerprint: string }
  /** The caller's fingerprint: the state decided on, and whether the stored one was trusted. */
  | { readonly kind: 'state', readonly state: unknown, readonly valid: boolean }

// The script's %S: anything but C's isspace() characters.
const FINGERPRINT = /^[^ \t\n\v\f\r]*/
// The script's '^ (%-?%d+) (%d+)$' patterns and its decimal() check, per field count: the first
// field may be signed (only a token bucket's level is trusted below 0; validQuota).
const FIELD = '(0|[1-9][0-9]{0,15})'
const FIRST = '(0|-?[1-9][0-9]{0,15})'
const FIELDS = [1, 2, 3, 4, 5].map((n) => new RegExp(`^ ${FIRST}${` ${FIELD}`.repeat(n - 1)}$`))

function gcd (a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b]
  return a
}

/** gcra's constants, as the script computes them: scale s, interval T, tau = burst * T. */
function gcraConstants (policy: Policy): { scale: number, interval: number, tau: number } {
  const g = gcd(policy.limit, policy.windowMs)
  const interval = policy.windowMs / g
  return { scale: policy.limit / g, interval, tau: capacityOf(policy) * interval }
}

/**
 * The policy's worst recovery time R in ms: how long the worst state (`worstState()`) takes to
 * recover fully. token-bucket and gcra ceil(burst * windowMs / limit), fixed-window windowMs,
 * sliding-window-counter 2 * windowMs. It is also the allowance for a time field in the future.
 */
export function recoveryMs (policy: Policy): number {
  switch (policy.algorithm) {
    case 'token-bucket': return ceilDiv(capacityOf(policy) * policy.windowMs, policy.limit)
    case 'fixed-window': return policy.windowMs
    case 'sliding-window-counter': return 2 * policy.windowMs
    case 'gcra': {
      const { scale, tau } = gcraConstants(policy)
      return ceilDiv(tau, scale)
    }
  }
}

/**
 * Whether the kernel's state fields (in the order of its `write()`) are in range at `now`; with a
 * penalty, the block too: it ends at most the longest block after a decision made up to R ahead
 * (with the algorithm's own wait, at most R, when longer), and counts at most `MAX_STRIKES`.
 */
export function validFields (policy: Policy, row: ArrayLike<number>, now: number): boolean {
  const penalty = policy.penalty
  if (penalty === undefined) return validQuota(policy, row, now)
  const fields = kernelOf(policy.algorithm).fields
  const R = recoveryMs(policy)
  return validQuota(policy, row, now) &&
    (row[fields] as number) <= now + R + Math.max(R, longestBlockMs(penalty, policy.windowMs)) &&
    (row[fields + 1] as number) <= MAX_STRIKES
}

// A charge's debt of one capacity (the script's D) is trusted only under a policy with room for
// it, which is the only kind a charge reaches (chargeProblem()).
function validQuota (policy: Policy, row: ArrayLike<number>, now: number): boolean {
  const { limit, windowMs } = policy
  const horizon = now + recoveryMs(policy)
  const debt = chargeProblem(policy) === undefined ? 1 : 0
  const n1 = row[0] as number
  const n2 = row[1] as number
  if (policy.algorithm !== 'token-bucket' && n1 < 0) return false
  switch (policy.algorithm) {
    case 'token-bucket': {
      const capacity = capacityOf(policy) * windowMs
      return n1 >= -debt * capacity && n1 <= capacity && n2 <= horizon
    }
    case 'fixed-window': return n1 % windowMs === 0 && n1 <= horizon && n2 <= (1 + debt) * limit
    case 'sliding-window-counter': return n1 % windowMs === 0 && n1 <= horizon && n2 <= limit && (row[2] as number) <= (1 + debt) * limit
    case 'gcra': {
      const { scale, tau } = gcraConstants(policy)
      return n1 <= horizon * scale + (1 + debt) * tau
    }
  }
}

/**
 * The worst state a client can legitimately be in at `now`: token-bucket empty at now,
 * fixed-window full in now's window, sliding-window-counter's current window full, gcra the whole
 * burst taken at now. Each denies every cost and recovers within `recoveryMs()`.
 */
export function worstState (policy: Policy, now: number): unknown {
  // With a penalty: the algorithm's worst, not blocked (its denial starts a block).
  if (policy.penalty !== undefined) return { inner: worstQuota(policy, now), blockedUntil: 0, strikes: 0 }
  return worstQuota(policy, now)
}

function worstQuota (policy: Policy, now: number): unknown {
  const { limit, windowMs } = policy
  const start = Math.floor(now / windowMs) * windowMs
  switch (policy.algorithm) {
    case 'token-bucket': return { tokens: 0, last: now }
    case 'fixed-window': return { start, count: limit }
    case 'sliding-window-counter': return { start, previous: 0, current: limit }
    case 'gcra': {
      const { scale, tau } = gcraConstants(policy)
      return { tat: now * scale + tau }
    }
  }
}

/**
 * A state the kernel produced (so: safe integers; only a token bucket's level is ever below 0), as the script decides on it at
 * `now` once stored: itself if in range, else the worst state.
 */
export function checkedState (policy: Policy, state: unknown, now: number): unknown {
  const kernel = kernelFor(policy)
  const row = new Float64Array(kernel.fields)
  kernel.write(state, row, 0)
  return validFields(policy, row, now) ? state : worstState(policy, now)
}

/**
 * A stored value (a string `GET` returned) as the script reads it under `policy`, whose
 * fingerprint is `fingerprint`, at server time `now` (`Infinity`: the time bounds are not checked).
 */
export function readStored (value: string, policy: Policy, fingerprint: string, now: number): StoredRead {
  const stored = (FINGERPRINT.exec(value) as RegExpExecArray)[0]
  if (stored !== fingerprint) return { kind: 'conflict', fingerprint: stored }
  const kernel = kernelFor(policy)
  const match = (FIELDS[kernel.fields - 1] as RegExp).exec(value.slice(stored.length))
  if (match !== null) {
    const row = Float64Array.from(match.slice(1), Number)
    if (validFields(policy, row, now)) return { kind: 'state', state: kernel.read(row, 0), valid: true }
  }
  return { kind: 'state', state: worstState(policy, now), valid: false }
}

/**
 * A key at `address`, asked for under `requested`, holds the stored fingerprint `fingerprint`:
 * `RatesPolicyConflictError` when that names a policy, else the key holds something this backend
 * did not write (`RatesUnavailableError`). Never a reset.
 */
export function keyConflict (address: string, requested: Readonly<Policy>, fingerprint: string, key: string): never {
  const stored = policyOfFingerprint(fingerprint)
  if (stored !== undefined) throw new RatesPolicyConflictError(address, stored, requested)
  throw new RatesUnavailableError(`the key ${JSON.stringify(key)} holds a value this backend did not write`)
}
