import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify'
import { sendBuilt, type ErrorResponseBuilder } from './error-response.js'
import type { Settings } from './options.js'
import type { Permits } from './permits.js'
import { MESSAGES, refuseProblem, type RefusalReason } from './problem.js'
import { RateCheck, type Next } from './rate-check.js'
import { refuse } from './refusal.js'
import type { RouteGate } from './route-gate.js'
import type { GateCounters } from './stats.js'

/**
 * The enforcing check with refusals other than the built-in JSON and text bodies: the
 * application's `errorResponseBuilder`, and/or the `application/problem+json` body. A builder
 * that throws or returns no object is logged (at `error`, once until it works again, with the
 * route) and the request is refused with the built-in body instead — never let through, never a
 * 500. A separate class so that the default check's refusal stays as it was.
 */
export class CustomRefusalCheck extends RateCheck {
  private readonly builder: ErrorResponseBuilder | undefined
  private builderFailing = false

  constructor (settings: Settings, global: GateCounters, permits: Permits, log: FastifyBaseLogger, registration: string, builder: ErrorResponseBuilder | undefined) {
    super(settings, global, permits, log, registration)
    this.builder = builder
  }

  protected override answer (request: FastifyRequest, reply: FastifyReply, next: Next, gate: RouteGate, status: 429 | 503, retrySeconds: number, reason: RefusalReason, message = MESSAGES[reason]): void {
    if (this.builder !== undefined) {
      const failure = sendBuilt(this.builder, request, reply, next as (error: unknown) => void, gate, status, retrySeconds, reason)
      if (failure === undefined) {
        this.builderFailing = false
        return
      }
      if (!this.builderFailing) {
        this.builderFailing = true
        this.log.error({ route: gate.name, reason, err: failure }, `fastify-admission: errorResponseBuilder failed for ${gate.name}; refusing with the built-in body until it works`)
      }
    }
    if (this.settings.responseBody === 'problem') refuseProblem(reply, status, retrySeconds, reason)
    else refuse(reply, status, retrySeconds, this.settings.responseBody, message)
  }
}
