// The lease rules (core/rates/lease.ts): how many units a lease asks for, how the batch follows
// the key's rate, when a lease ends and until when it may give units back.
import t from 'tap'
import fc from 'fast-check'
import { leaseEndsAt, leaseUnits, nextBatch, returnDeadline } from '../../../lib/core/rates/lease.js'
import type { Policy } from '../../../lib/core/rates/index.js'

const fixed: Policy = { algorithm: 'fixed-window', limit: 100, windowMs: 1000 }
const sliding: Policy = { algorithm: 'sliding-window-counter', limit: 100, windowMs: 1000 }
const bucket: Policy = { algorithm: 'token-bucket', limit: 100, windowMs: 1000, burst: 100 }
const gcra: Policy = { algorithm: 'gcra', limit: 100, windowMs: 1000, burst: 100 }

t.test('a lease asks for its batch, at least the cost, at most a quarter of what the quota had left', async (t) => {
  t.equal(leaseUnits(1, 1, 1000), 1, 'batch 1: an ordinary decision')
  t.equal(leaseUnits(64, 1, 1000), 64)
  t.equal(leaseUnits(64, 1, 100), 25, 'a quarter of 100 left')
  t.equal(leaseUnits(64, 3, 8), 3, 'never below the cost: the last units go one decision at a time')
  t.equal(leaseUnits(64, 1, 0), 1, 'nothing known left (a new identity): the cost alone')
  fc.assert(fc.property(fc.integer({ min: 1, max: 1000 }), fc.integer({ min: 1, max: 50 }), fc.integer({ min: 0, max: 10_000 }), (batch, cost, remaining) => {
    const units = leaseUnits(batch, cost, remaining)
    return units >= cost && (units === cost || (units <= batch && units * 4 <= remaining))
  }))
})

t.test('the batch doubles while leases are spent within half a hold, halves when one ends mostly unused', async (t) => {
  t.equal(nextBatch(8, true, 10, 0, 100, 100), 16, 'spent in 10 ms of a 100 ms hold')
  t.equal(nextBatch(64, true, 10, 0, 100, 100), 100, 'at most maxUnits')
  t.equal(nextBatch(8, true, 50, 0, 100, 100), 8, 'spent in half the hold: unchanged')
  t.equal(nextBatch(8, false, 100, 5, 100, 100), 4, 'ended by time with 5 of 8 unused')
  t.equal(nextBatch(8, false, 100, 4, 100, 100), 8, 'half unused: unchanged')
  t.equal(nextBatch(1, false, 100, 1, 100, 100), 1, 'never below 1')
})

t.test('a lease ends after its hold, a window\'s with its window at the latest', async (t) => {
  t.equal(leaseEndsAt(bucket, 10_500, 100), 10_600)
  t.equal(leaseEndsAt(gcra, 10_950, 100), 11_050, 'a bucket has no window to end with')
  t.equal(leaseEndsAt(fixed, 10_500, 100), 10_600)
  t.equal(leaseEndsAt(fixed, 10_950, 100), 11_000, 'the window ends first')
  t.equal(leaseEndsAt(sliding, 10_999, 100), 11_000)
  t.equal(leaseEndsAt(fixed, 11_000, 100), 11_100, 'a window starts at a multiple of windowMs')
})

t.test('a window\'s units may go back until its end; a bucket\'s never', async (t) => {
  t.equal(returnDeadline(fixed, 10_500), 11_000)
  t.equal(returnDeadline(sliding, 10_000), 11_000)
  t.equal(returnDeadline(bucket, 10_500), -Infinity)
  t.equal(returnDeadline(gcra, 10_500), -Infinity)
})
