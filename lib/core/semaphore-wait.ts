/**
 * When a full semaphore frees a permit, from what it knows: how long its requests take, and how
 * long its oldest permit has been held. Integers in (ms), whole seconds out; no clock here.
 */

/** The longest wait a semaphore advertises, s: past a minute the estimate says more about one slow request than about the route. */
export const MAX_SEMAPHORE_WAIT_S = 60

/**
 * The route's observed duration after one more request took `sampleMs`: a longer request is taken
 * at once, a shorter one moves it down by a quarter of the gap (rounded so that it stays above the
 * sample until it reaches it). It leans long, so that a wait built on it is late rather than early.
 * `previousMs` 0: nothing observed yet.
 */
export function observeDuration (previousMs: number, sampleMs: number): number {
  const sample = Math.ceil(sampleMs)
  if (sample >= previousMs) return sample
  return previousMs - Math.floor((previousMs - sample) / 4)
}

/**
 * `Retry-After` of a full semaphore whose oldest permit is `oldestAgeMs` old, on a route whose
 * requests take `observedMs`: the whole seconds, rounded up, until that permit is expected to end
 * (the first slot to free), at least 1 and at most `MAX_SEMAPHORE_WAIT_S`. With nothing observed
 * yet, or an oldest permit past its expected end, the specification's constant 1.
 */
export function semaphoreWaitSeconds (oldestAgeMs: number, observedMs: number): number {
  const left = observedMs - oldestAgeMs
  if (left <= 0) return 1
  const seconds = Math.ceil(left / 1000)
  return seconds > MAX_SEMAPHORE_WAIT_S ? MAX_SEMAPHORE_WAIT_S : seconds
}
