import t from 'tap'
import { fixedWindow, gcra, kernelOf, kernels, slidingWindowCounter, tokenBucket } from '../../../lib/core/rates/index.js'
import type { Algorithm } from '../../../lib/core/rates/index.js'

t.test('one kernel per algorithm', async (t) => {
  const expected: Record<Algorithm, unknown> = {
    'token-bucket': tokenBucket,
    'fixed-window': fixedWindow,
    'sliding-window-counter': slidingWindowCounter,
    gcra
  }
  t.same(Object.keys(kernels).sort(), Object.keys(expected).sort())
  for (const algorithm of Object.keys(expected) as Algorithm[]) {
    t.equal(kernels[algorithm], expected[algorithm])
    t.equal(kernelOf(algorithm), expected[algorithm])
  }
  t.ok(Object.isFrozen(kernels))
  t.same([tokenBucket.fields, fixedWindow.fields, slidingWindowCounter.fields, gcra.fields], [2, 2, 3, 1])
})
