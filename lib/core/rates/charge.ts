import type { Kernel, Outcome, Policy } from './types.js'

/**
 * What an identity looks like right after a charge: `allowed` when a cost-1 request passes now,
 * else the least wait until one does (`retryAfterMs`); `remaining`, `resetAt` and `moreAt` as they
 * stand (nothing consumed by the look). `state` is the charged state, which the caller stores.
 *
 * A denied consume stores nothing (every kernel's rule), so it is the look for a state in debt;
 * a cost-0 consume admits and consumes nothing, so it is the look for one that is not.
 */
export function chargedOutcome<S> (kernel: Pick<Kernel<S>, 'consume'>, next: S, policy: Policy, now: number): Outcome<S> {
  const one = kernel.consume(next, policy, now, 1)
  if (!one.allowed) return { ...one, state: next }
  const look = kernel.consume(next, policy, now, 0)
  return { allowed: true, remaining: look.remaining, retryAfterMs: 0, resetAt: look.resetAt, moreAt: look.moreAt, state: next }
}
