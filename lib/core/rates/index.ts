import { fixedWindow } from './fixed-window.js'
import { gcra } from './gcra.js'
import { slidingWindowCounter } from './sliding-window-counter.js'
import { tokenBucket } from './token-bucket.js'
import type { Algorithm, Kernel } from './types.js'

export type { Algorithm, Kernel, Outcome, Policy } from './types.js'
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
