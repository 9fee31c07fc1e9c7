import { exactObject } from '../validation/checks.js'
import { RatesInvalidArgumentError } from './errors.js'

export interface ConsumeOptions {
  /** Units this call takes: a positive safe integer at most the policy's capacity (default 1). */
  cost?: number
}

const CONSUME_OPTIONS = { keys: ['cost'], expected: 'an object { cost? }', options: true }

/** The `cost` of a call's options (an exact options object, or undefined), not yet checked against a capacity. */
export function costOption (options: unknown): unknown {
  if (options === undefined) return undefined
  return exactObject(RatesInvalidArgumentError.complain, 'options', options, CONSUME_OPTIONS).cost
}
