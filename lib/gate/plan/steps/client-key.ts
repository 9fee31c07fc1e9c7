import type { FastifyRequest } from 'fastify'
import type { Step } from '../../outcomes/recorder.js'

/**
 * The client's key for the quotas (the `key` option's, or the address). An application's `key`
 * that throws or returns no key answers 500 (Fastify's error path) and the permit goes back.
 */
export function clientKeyStep (keyOf: (request: FastifyRequest) => string, next: Step): Step {
  return function clientKey (permit) {
    let key: string
    try {
      key = keyOf(permit.request)
    } catch (error) {
      permit.fail(error)
      return
    }
    permit.key = key
    next(permit)
  }
}
