import type { FastifyBaseLogger } from 'fastify'
import { CustomRefusalCheck } from './custom-refusal.js'
import type { ErrorResponseBuilder } from './error-response.js'
import type { Settings } from './options.js'
import type { Permits } from './permits.js'
import { RateCheck } from './rate-check.js'
import { ShadowCheck } from './shadow-check.js'
import type { GateCounters } from './stats.js'

/**
 * The checks of one registration, one per kind of refusal, made once and shared by the routes
 * that chose the same: the plain check (the built-in JSON or text body), a custom-refusal check per
 * `errorResponseBuilder` (or for the problem body), and the shadow check of `enforce: false`.
 */
export class Checks {
  private readonly settings: Settings
  private readonly global: GateCounters
  private readonly permits: Permits
  private readonly log: FastifyBaseLogger
  private readonly registration: string
  private readonly custom = new Map<ErrorResponseBuilder | undefined, RateCheck>()
  private shadow: RateCheck | undefined
  private plain: RateCheck | undefined

  constructor (settings: Settings, global: GateCounters, permits: Permits, log: FastifyBaseLogger, registration: string) {
    this.settings = settings
    this.global = global
    this.permits = permits
    this.log = log
    this.registration = registration
  }

  of (enforce: boolean, builder: ErrorResponseBuilder | undefined): RateCheck {
    if (!enforce) return (this.shadow ??= new ShadowCheck(this.settings, this.global, this.permits, this.log, this.registration))
    if (builder === undefined && this.settings.responseBody !== 'problem') return (this.plain ??= new RateCheck(this.settings, this.global, this.permits, this.log, this.registration))
    let check = this.custom.get(builder)
    if (check === undefined) {
      check = new CustomRefusalCheck(this.settings, this.global, this.permits, this.log, this.registration, builder)
      this.custom.set(builder, check)
    }
    return check
  }
}
