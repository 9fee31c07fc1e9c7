import type { Test } from 'tap'
import { RatesInvalidArgumentError } from '../../lib/rates/errors.js'

/** The error `fn` throws synchronously. */
export function thrown (fn: () => unknown): unknown {
  try {
    fn()
  } catch (error) {
    return error
  }
  throw new Error('expected a synchronous throw, nothing was thrown')
}

/**
 * The reason `call()` rejects with: `call()` must return a promise (never throw synchronously)
 * and that promise must reject.
 */
export async function rejection (t: Test, call: () => Promise<unknown>): Promise<unknown> {
  let promise: Promise<unknown> | undefined
  t.doesNotThrow(() => { promise = call() }, 'a rejection, not a synchronous throw')
  t.type(promise, Promise)
  try {
    await promise
  } catch (error) {
    return error
  }
  t.fail('expected a rejection, the promise resolved')
  return undefined
}

/** The error `fn` throws, which must be a RatesInvalidArgumentError. */
export function invalid (fn: () => unknown): RatesInvalidArgumentError {
  const error = thrown(fn)
  if (error instanceof RatesInvalidArgumentError) return error
  throw error
}
