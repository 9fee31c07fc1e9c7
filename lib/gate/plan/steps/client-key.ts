import type { FastifyRequest } from 'fastify'
import type { Contained } from '../../../callbacks/contained.js'
import type { Step } from '../../outcomes/recorder.js'

/**
 * The client's key for the quotas (the `key` option's, or the address). An application's `key`
 * that throws or returns no key answers 500 (Fastify's error path, the application's error) and
 * the permit goes back: without a key there is no quota to decide on, and another one (the
 * address) would let a client that can make its `key` throw choose its quota. Logged once for the
 * route (`contained`).
 */
export function clientKeyStep (keyOf: (request: FastifyRequest) => string, contained: Contained, next: Step): Step {
  return function clientKey (permit) {
    let key: string
    try {
      key = keyOf(permit.request)
    } catch (error) {
      contained.failed(error)
      permit.fail(error, 'key')
      return
    }
    contained.worked()
    permit.key = key
    next(permit)
  }
}
