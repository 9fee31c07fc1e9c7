import { fixedWindow } from './fixed-window.js'
import { gcra } from './gcra.js'
import { slidingWindowCounter } from './sliding-window-counter.js'
import { tokenBucket } from './token-bucket.js'
import { withPenalty } from './penalty.js'
import type { Algorithm, Kernel, Policy } from './types.js'

export type { Algorithm, Kernel, Outcome, Penalty, Policy } from './types.js'
export { blockMs, longestBlockMs, MAX_STRIKES, withPenalty } from './penalty.js'
export type { PenalizedState } from './penalty.js'
export { tokenBucket } from './token-bucket.js'
export type { TokenBucketState } from './token-bucket.js'
export { fixedWindow } from './fixed-window.js'
export type { FixedWindowState } from './fixed-window.js'
export { slidingWindowCounter } from './sliding-window-counter.js'
export type { SlidingWindowCounterState } from './sliding-window-counter.js'
export { gcra, gcraScale } from './gcra.js'
export type { GcraState } from './gcra.js'

/** Each algorithm's kernel. */
export const kernels: Readonly<Record<Algorithm, Kernel<unknown>>> = Object.freeze({
  'token-bucket': tokenBucket,
  'fixed-window': fixedWindow,
  'sliding-window-counter': slidingWindowCounter,
  gcra
})

/** The kernel of an algorithm. */
export function kernelOf (algorithm: Algorithm): Kernel<unknown> {
  return kernels[algorithm]
}

/** The kernel that decides a policy: its algorithm's, with its penalty when it has one. */
export function kernelFor (policy: Policy): Kernel<unknown> {
  const kernel = kernels[policy.algorithm]
  return policy.penalty === undefined ? kernel : withPenalty(kernel, policy.penalty) as Kernel<unknown>
}
