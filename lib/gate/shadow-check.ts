import type { FastifyReply, FastifyRequest } from 'fastify'
import type { FastifyBaseLogger } from 'fastify'
import type { Settings } from './options.js'
import type { Permits } from './permits.js'
import { RateCheck, type Next } from './rate-check.js'
import type { RouteGate } from './route-gate.js'
import type { GateCounters } from './stats.js'

/**
 * The check of `enforce: false` (shadow mode, a dry run): it decides as the enforcing check does
 * — the quota is consumed, the headers are set as configured — but never refuses. What would have
 * been refused is counted (`wouldLimit`, `wouldShed`) and logged at `info` through the request's
 * logger, and goes on; a backend that cannot decide admits (counted in `unavailable`). `onLimit`
 * and `onShed` are not called: nothing was limited or shed.
 */
export class ShadowCheck extends RateCheck {
  constructor (settings: Settings, global: GateCounters, permits: Permits, log: FastifyBaseLogger, registration: string) {
    super(settings, global, permits, log, registration, true)
  }

  protected override limit (request: FastifyRequest, _reply: FastifyReply, gate: RouteGate, retryAfterMs: number, next: Next, key: string): void {
    this.global.wouldLimit++
    gate.counters.wouldLimit++
    request.log.info({ route: gate.name, reason: 'limited', retryAfterSeconds: Math.max(1, Math.ceil(retryAfterMs / 1000)) }, 'fastify-admission: would have refused this request (enforce: false)')
    this.admit(request, gate, next, key)
  }

  /** A full gate lets the request on, holding no permit: the gauge keeps counting what the gate would hold. */
  override whenFull (request: FastifyRequest, _reply: FastifyReply, gate: RouteGate): boolean {
    this.global.wouldShed++
    gate.counters.wouldShed++
    request.log.info({ route: gate.name, reason: 'shed', retryAfterSeconds: 1 }, 'fastify-admission: would have refused this request (enforce: false)')
    return true
  }
}
