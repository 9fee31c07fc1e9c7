import t from 'tap'
import fc from 'fast-check'
import { MAX_SEMAPHORE_WAIT_S, observeDuration, semaphoreWaitSeconds } from '../../lib/core/semaphore-wait.js'

t.test('observeDuration: a longer request is taken at once, a shorter one moves it a quarter of the way', async (t) => {
  t.equal(observeDuration(0, 3000.4), 3001, 'the first sample, rounded up')
  t.equal(observeDuration(3000, 5000), 5000)
  t.equal(observeDuration(5000, 1000), 4000)
  t.equal(observeDuration(4000, 4000), 4000)
  t.equal(observeDuration(1002, 1000), 1002, 'within 3 ms it stays: never below a sample it has not reached')
  fc.assert(fc.property(fc.nat(1e9), fc.nat(1e9), (previous, sample) => {
    const next = observeDuration(previous, sample)
    return Number.isSafeInteger(next) && next >= sample && next <= Math.max(previous, sample)
  }))
})

t.test('semaphoreWaitSeconds: until the oldest permit is expected to end, rounded up, from 1 to the cap', async (t) => {
  for (const [age, observed, seconds, why] of [
    [200, 3000, 3, '2.8 s left: 3'],
    [0, 3000, 3, 'a permit just taken'],
    [2001, 3000, 1, '0.999 s left: 1'],
    [0, 0, 1, 'nothing observed: the constant 1'],
    [5000, 3000, 1, 'past its expected end: 1'],
    [0, 3_600_000, MAX_SEMAPHORE_WAIT_S, 'at most a minute']
  ] as const) t.equal(semaphoreWaitSeconds(age, observed), seconds, why)
  t.equal(MAX_SEMAPHORE_WAIT_S, 60)
  fc.assert(fc.property(fc.nat(1e9), fc.nat(1e9), (age, observed) => {
    const seconds = semaphoreWaitSeconds(age, observed)
    // Never before the oldest permit's expected end, unless capped.
    return Number.isInteger(seconds) && seconds >= 1 && seconds <= MAX_SEMAPHORE_WAIT_S &&
      (seconds === MAX_SEMAPHORE_WAIT_S || seconds * 1000 >= observed - age)
  }))
})
