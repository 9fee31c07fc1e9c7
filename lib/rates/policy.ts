import type { Algorithm, Penalty, Policy } from '../core/rates/types.js'
import { ceilDiv } from '../core/rates/arithmetic.js'
import { exactObject, positiveInteger, type Complain } from '../validation/checks.js'
import { RatesInvalidArgumentError } from './errors.js'

/** The algorithms, in the order messages list them. */
export const ALGORITHMS: readonly Algorithm[] = Object.freeze(['token-bucket', 'fixed-window', 'sliding-window-counter', 'gcra'])

const KEYS = ['algorithm', 'limit', 'windowMs', 'burst', 'penalty']
const PENALTY_KEYS = ['mode', 'maxMs']
/** `penalty: 'double'` blocks at most this many windows: six doublings. */
export const DOUBLE_MAX_WINDOWS = 64
/** 2100-01-01T00:00:00Z in epoch ms: GCRA timestamps, scaled by `s`, must stay exact until then. */
export const GCRA_HORIZON_MS = 4_102_444_800_000
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER)
const SAFE = `a safe integer (at most ${Number.MAX_SAFE_INTEGER})`

function hasBurst (algorithm: Algorithm): boolean {
  return algorithm === 'token-bucket' || algorithm === 'gcra'
}

function gcd (a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b]
  return a
}

/**
 * Copies, validates, normalizes and freezes a policy; throws `RatesInvalidArgumentError` naming the
 * field (under `path`) otherwise.
 *
 * The input is an exact plain object: its prototype is `Object.prototype`; its own keys are all
 * enumerable string-keyed data properties among `algorithm`, `limit`, `windowMs` and `burst`. Every
 * property is inspected by descriptor before any value is used, so a getter is never invoked. An
 * own property holding `undefined` counts as absent (as TypeScript's optional properties allow).
 * - `algorithm`: one of `ALGORITHMS`; required unless `defaults.algorithm` is given.
 * - `limit`, `windowMs`: positive safe integers.
 * - `burst`: a positive safe integer for `token-bucket` and `gcra`, default `limit`; any value for a
 *   window algorithm is an invalid combination.
 * - The numbers the kernels keep exact must be safe integers: token-bucket `burst * windowMs`;
 *   sliding-window-counter `limit * windowMs`; gcra, with g = gcd(limit, windowMs), s = limit / g
 *   and T = windowMs / g, `burst * T` and `s * GCRA_HORIZON_MS`; and the state's time to full
 *   recovery in ms (its TTL): `ceil(burst * windowMs / limit)` for token-bucket and gcra,
 *   `2 * windowMs` for the window algorithms.
 *
 * - `penalty`: `'restart'`, `'double'` or `{ mode, maxMs? }` (`maxMs`, for `'double'` only: the
 *   longest block, at least `windowMs`, default 64 windows); see `Penalty`.
 *
 * The result has its keys in the order `{ algorithm, limit, windowMs, burst?, penalty? }`, `burst`
 * only for `token-bucket` and `gcra`.
 */
export function normalizePolicy (input: unknown, path = 'policy', defaults?: { algorithm?: Algorithm }, complain: Complain = RatesInvalidArgumentError.complain): Readonly<Policy> {
  const fields: Fields = exactObject(complain, path, input, POLICY_SHAPE)
  const algorithm = fields.algorithm === undefined ? defaults?.algorithm : fields.algorithm
  if (typeof algorithm !== 'string' || !(ALGORITHMS as readonly string[]).includes(algorithm)) {
    throw complain({ path: `${path}.algorithm`, expected: `one of ${ALGORITHMS.map((a) => `'${a}'`).join(', ')}`, value: algorithm })
  }
  const limit = positiveInteger(complain, `${path}.limit`, fields.limit)
  const windowMs = positiveInteger(complain, `${path}.windowMs`, fields.windowMs)
  const policy = { algorithm: algorithm as Algorithm, limit, windowMs }
  if (!hasBurst(policy.algorithm)) {
    if (fields.burst !== undefined) {
      throw complain({ path: `${path}.burst`, expected: `absent for algorithm '${algorithm}' (only 'token-bucket' and 'gcra' have a burst)`, value: fields.burst })
    }
    if (policy.algorithm === 'sliding-window-counter') {
      safe(complain, path, policy, `${path}.limit * ${path}.windowMs`, BigInt(limit) * BigInt(windowMs), `${limit} * ${windowMs}`)
    }
    safe(complain, path, policy, `2 * ${path}.windowMs (the state's time to full recovery in ms)`, 2n * BigInt(windowMs), `2 * ${windowMs}`)
    return withPenalty(complain, path, policy, fields.penalty)
  }
  const burst = fields.burst === undefined ? limit : positiveInteger(complain, `${path}.burst`, fields.burst)
  const full = { ...policy, burst }
  const scaled = BigInt(burst) * BigInt(windowMs)
  if (policy.algorithm === 'token-bucket') {
    safe(complain, path, full, `${path}.burst * ${path}.windowMs`, scaled, `${burst} * ${windowMs}`)
  } else {
    const g = gcd(limit, windowMs)
    const s = limit / g
    const T = windowMs / g
    safe(complain, path, full, `${path}.burst * ${path}.windowMs / gcd(${path}.limit, ${path}.windowMs)`, BigInt(burst) * BigInt(T), `${burst} * ${T}`)
    safe(complain, path, full, `${path}.limit / gcd(${path}.limit, ${path}.windowMs) * ${GCRA_HORIZON_MS} (GCRA's time scale until the year 2100)`,
      BigInt(s) * BigInt(GCRA_HORIZON_MS), `${s} * ${GCRA_HORIZON_MS}`)
  }
  const l = BigInt(limit)
  safe(complain, path, full, `ceil(${path}.burst * ${path}.windowMs / ${path}.limit) (the state's time to full recovery in ms)`,
    (scaled + l - 1n) / l, `ceil(${burst} * ${windowMs} / ${limit})`)
  return withPenalty(complain, path, full, fields.penalty)
}

/** The policy with its penalty (when given), frozen. */
function withPenalty (complain: Complain, path: string, policy: Policy, value: unknown): Readonly<Policy> {
  if (value === undefined) return Object.freeze(policy)
  const at = `${path}.penalty`
  const input: Record<string, unknown> = typeof value === 'string' ? { mode: value } : exactObject(complain, at, value, PENALTY_SHAPE)
  const maxMs = input.maxMs
  let penalty: Penalty
  if (input.mode === 'restart') {
    if (maxMs !== undefined) throw complain({ path: `${at}.maxMs`, expected: "absent for mode 'restart' (each refusal blocks one window from it)", value: maxMs })
    penalty = Object.freeze({ mode: 'restart' as const })
  } else if (input.mode === 'double') {
    const longest = maxMs === undefined ? DOUBLE_MAX_WINDOWS * policy.windowMs : positiveInteger(complain, `${at}.maxMs`, maxMs)
    if (longest < policy.windowMs) throw complain({ path: `${at}.maxMs`, expected: `at least windowMs (${policy.windowMs}): the first refusal blocks one window`, value: maxMs })
    // A block ends at `now + maxMs` at the latest, on clocks until the year 2100: still a safe integer.
    safe(complain, path, policy, `${at}.maxMs + ${GCRA_HORIZON_MS} (the end of the longest block, in ms, until the year 2100)`, BigInt(longest) + BigInt(GCRA_HORIZON_MS), `${longest} + ${GCRA_HORIZON_MS}`)
    penalty = Object.freeze({ mode: 'double' as const, maxMs: longest })
  } else {
    throw complain({ path: typeof value === 'string' ? at : `${at}.mode`, expected: "'restart' or 'double'", value: input.mode })
  }
  return Object.freeze({ ...policy, penalty })
}

/** The policy's capacity, the largest cost: `burst` for token-bucket and gcra, `limit` otherwise. */
export function capacityOf (policy: Policy): number {
  return hasBurst(policy.algorithm) ? policy.burst ?? policy.limit : policy.limit
}

/** Whether two normalized policies are the same. */
export function samePolicy (a: Policy, b: Policy): boolean {
  return a.algorithm === b.algorithm && a.limit === b.limit && a.windowMs === b.windowMs && a.burst === b.burst &&
    a.penalty?.mode === b.penalty?.mode && penaltyMax(a) === penaltyMax(b)
}

function penaltyMax (policy: Policy): number | undefined {
  return policy.penalty?.mode === 'double' ? policy.penalty.maxMs : undefined
}

/**
 * A normalized policy as a stable string, `algorithm:limit:windowMs[:burst][~restart|~double.maxMs]`,
 * e.g. `token-bucket:100:60000:20`, `fixed-window:100:60000` or `fixed-window:100:60000~restart`;
 * equal exactly when `samePolicy()`.
 */
export function policyFingerprint (policy: Policy): string {
  const base = `${policy.algorithm}:${policy.limit}:${policy.windowMs}`
  const quota = policy.burst === undefined ? base : `${base}:${policy.burst}`
  const penalty = policy.penalty
  return penalty === undefined ? quota : penalty.mode === 'restart' ? `${quota}~restart` : `${quota}~double.${penalty.maxMs}`
}

const FINGERPRINT = /^(token-bucket|fixed-window|sliding-window-counter|gcra):([1-9][0-9]*):([1-9][0-9]*)(?::([1-9][0-9]*))?(?:~(restart|double\.([1-9][0-9]*)))?$/

/** The policy a fingerprint names (the inverse of `policyFingerprint`), or undefined when it names none. */
export function policyOfFingerprint (fingerprint: string): Policy | undefined {
  const match = FINGERPRINT.exec(fingerprint)
  if (match === null) return undefined
  const [, algorithm, limit, windowMs, burst, penalty, maxMs] = match as unknown as [string, Policy['algorithm'], string, string, string | undefined, string | undefined, string | undefined]
  const quota: Policy = burst === undefined
    ? { algorithm, limit: Number(limit), windowMs: Number(windowMs) }
    : { algorithm, limit: Number(limit), windowMs: Number(windowMs), burst: Number(burst) }
  if (penalty === undefined) return Object.freeze(quota)
  return Object.freeze({ ...quota, penalty: Object.freeze(maxMs === undefined ? { mode: 'restart' as const } : { mode: 'double' as const, maxMs: Number(maxMs) }) })
}

interface Fields { algorithm?: unknown, limit?: unknown, windowMs?: unknown, burst?: unknown, penalty?: unknown }

export const POLICY_SHAPE = { keys: KEYS, expected: 'a plain object { algorithm, limit, windowMs, burst?, penalty? }' }
const PENALTY_SHAPE = { keys: PENALTY_KEYS, expected: "'restart', 'double' or a plain object { mode, maxMs? }" }

function safe (complain: Complain, path: string, policy: Policy, subject: string, value: bigint, formula: string): void {
  if (value > MAX_SAFE) throw complain({ path, expected: SAFE, value: { ...policy }, subject, got: `${value} (${formula})` })
}

/**
 * Why `policy` cannot hold a charge's debt exactly, or undefined when it can. A debt of one
 * capacity, plus a cost, triples the largest number a kernel handles: `burst * windowMs` (token
 * bucket), GCRA's `tat` ahead of its time scale until 2100, the window count (`limit`). A policy
 * near the safe-integer bound for requests alone may not have that room.
 */
export function chargeProblem (policy: Policy): string | undefined {
  const burst = BigInt(policy.burst ?? policy.limit)
  const limit = BigInt(policy.limit)
  const windowMs = BigInt(policy.windowMs)
  let value: bigint
  let formula: string
  if (policy.algorithm === 'token-bucket') {
    value = 3n * burst * windowMs
    formula = '3 * burst * windowMs'
  } else if (policy.algorithm === 'gcra') {
    const g = BigInt(gcd(policy.limit, policy.windowMs))
    value = (limit / g) * BigInt(GCRA_HORIZON_MS) + 3n * burst * (windowMs / g)
    formula = `limit / gcd(limit, windowMs) * ${GCRA_HORIZON_MS} + 3 * burst * windowMs / gcd(limit, windowMs)`
  } else {
    value = 3n * limit
    formula = '3 * limit'
  }
  return value > MAX_SAFE ? `${formula} = ${value}, above ${Number.MAX_SAFE_INTEGER}: a debt of one capacity would not stay exact` : undefined
}

/**
 * The quota a client can plan from (IETF httpapi-ratelimit-headers, draft 11): `q` units within
 * `w` seconds. `q` is the policy's capacity, what a client at rest may send at once: `burst` for
 * token-bucket and gcra, `limit` for the window algorithms. `w` is the time that whole quota takes
 * to come back, rounded up to a second: `burst` at `limit` per `windowMs` for the first two, one
 * window for the others. Rounding up only ever understates the rate, so a client that paces
 * itself at q per w is never refused for it; and `r` (what remains) is never above `q`.
 */
export function quotaOf (policy: Policy): { quota: number, windowSeconds: number } {
  const quota = capacityOf(policy)
  const refillMs = policy.algorithm === 'token-bucket' || policy.algorithm === 'gcra'
    ? ceilDiv(quota * policy.windowMs, policy.limit)
    : policy.windowMs
  return { quota, windowSeconds: Math.max(1, ceilDiv(refillMs, 1000)) }
}
