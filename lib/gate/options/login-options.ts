import type { FastifyReply, FastifyRequest } from 'fastify'
import { AdmissionOptionError } from '../errors.js'

// Login throttling's options (`count`, `failed`): which responses take from a route's quota.

/** What a route's requests count against its quota: every request (the default), or only failures (login throttling). */
export type CountMode = 'requests' | 'failures'

/** Whether a response is a failure, for `count: 'failures'`. */
export type FailedResponse = (request: FastifyRequest, reply: FastifyReply) => boolean

/** The default failure: a 4xx the route answered (wrong password 401, forbidden 403, bad request 400…), not a 5xx (the server's fault). */
export function clientError (_request: FastifyRequest, reply: FastifyReply): boolean {
  return reply.statusCode >= 400 && reply.statusCode < 500
}

export function countOption (path: string, value: unknown): CountMode {
  if (value === undefined) return 'requests'
  if (value !== 'requests' && value !== 'failures') throw new AdmissionOptionError(path, "'requests' or 'failures' (login throttling: only failed responses take from the quota)", value)
  return value
}

export function failedOption (path: string, value: unknown, count: CountMode): FailedResponse | undefined {
  if (value === undefined) return count === 'failures' ? clientError : undefined
  if (count !== 'failures') throw new AdmissionOptionError(path, "absent unless count is 'failures'", value)
  if (typeof value !== 'function' || Object.prototype.toString.call(value) === '[object AsyncFunction]') {
    throw new AdmissionOptionError(path, 'a synchronous function (request, reply) => boolean: whether the response is a failure', value)
  }
  return value as FailedResponse
}
