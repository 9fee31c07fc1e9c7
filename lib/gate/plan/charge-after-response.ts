import type { FastifyBaseLogger } from 'fastify'
import { Contained, isThenable } from '../../callbacks/contained.js'
import { AdmissionChargeError } from '../errors.js'
import { AdmissionOptionError } from '../../validation/errors.js'
import type { ChargeCallback } from '../options/charge-option.js'
import type { PermitEnd, PermitRecord } from '../release/permit-record.js'
import type { RouteGate } from '../route-gate.js'

/**
 * A route's charge after the response, once every quota it may charge (the route's, or each of
 * its tiers') can take one: the backend's limiters and stacks charge.
 */
export function chargeAfterResponse (route: string, charge: ChargeCallback, gates: readonly RouteGate[], backendKind: string, log: FastifyBaseLogger): ChargeAfterResponse {
  for (const gate of gates) {
    if (gate.limiter?.charge === undefined) {
      throw new AdmissionOptionError(`config.admission of ${route}.charge`, `absent on a backend that cannot charge after the work (the ${JSON.stringify(backendKind)} backend's limiters have no charge)`, charge)
    }
  }
  return new ChargeAfterResponse(charge, route, log)
}

/**
 * Charging after the response (a route's `charge`): the request took its `cost` up front, an
 * estimate; when its permit ends with the handler's work done (`responded`, `aborted` — the client
 * left, the work still ran — or `timedOut`), `charge(request, reply)` says what it really took, and
 * the difference goes to the quota that admitted it (the route's, or its tier's), by the key it was
 * admitted under: more puts the client into debt, refused with an honest `Retry-After` until time
 * repays it; less gives units back.
 *
 * Only a request the quota admitted is charged: a refused one took nothing, nor did one admitted
 * because the backend could not decide (`onBackendError: 'allow'`) or a shadow-mode request the
 * quota would have refused. What can go wrong is logged once per route until it works again, and
 * the estimate stands: the callback throws or rejects; it returns no amount (not a safe integer, or
 * below 0: `AdmissionChargeError`); the backend cannot take the charge. An amount above the quota's
 * capacity is logged the same way and charged as the capacity, the most a quota can owe.
 */
export class ChargeAfterResponse {
  private readonly charge: ChargeCallback
  private readonly route: string
  private readonly callback: Contained
  private readonly amount: Contained
  private readonly backend: Contained

  constructor (charge: ChargeCallback, route: string, log: FastifyBaseLogger) {
    this.charge = charge
    this.route = route
    this.callback = new Contained(log, 'charge', route, 'charging nothing beyond the request\'s cost')
    this.amount = new Contained(log, 'charge', route, 'charging nothing beyond the request\'s cost, or the capacity for an amount above it')
    this.backend = new Contained(log, 'charge (the backend)', route, 'the request\'s cost stands')
  }

  /** The permit's end (the route's `EndListener`). */
  readonly ended = (permit: PermitRecord, how: PermitEnd): void => {
    // A long-lived reply's work goes on past its permit: its estimate stands.
    if (how === 'refused' || how === 'longLived' || !permit.admitted || permit.backendFailed || permit.key === undefined) return
    let units: unknown
    try {
      units = this.charge(permit.request, permit.reply)
    } catch (error) {
      this.callback.failed(error)
      return
    }
    if (!isThenable(units)) {
      this.callback.worked()
      this.take(permit, units)
      return
    }
    Promise.resolve(units).then((resolved) => {
      this.callback.worked()
      this.take(permit, resolved)
    }, (error: unknown) => { this.callback.failed(error) })
  }

  private take (permit: PermitRecord, units: unknown): void {
    const gate = permit.gate
    const limiter = gate.limiter!
    const capacity = gate.stacked === undefined ? gate.quota : Math.max(...gate.stacked.quotas)
    if (typeof units !== 'number' || !Number.isSafeInteger(units) || units < 0) {
      this.amount.failed(new AdmissionChargeError(this.route, units, capacity))
      return
    }
    let amount = units
    if (amount > capacity) {
      this.amount.failed(new AdmissionChargeError(this.route, units, capacity))
      amount = capacity
    } else {
      this.amount.worked()
    }
    const delta = amount - gate.cost
    if (delta === 0) return
    const returnBy = delta < 0 ? returnDeadline(gate, permit.decidedAt) : Infinity
    // Units given back past the window that admitted them would be a gift to the next: not given.
    // (A finite deadline comes from a time the quota's clock gave: it has one.)
    if (returnBy !== Infinity && (returnBy === -Infinity || limiter.now!()! >= returnBy)) return
    limiter.charge!(permit.key!, delta, returnBy).then(this.backendWorked, this.backendFailed)
  }

  private readonly backendWorked = (): void => { this.backend.worked() }
  private readonly backendFailed = (error: unknown): void => { this.backend.failed(error) }
}

/**
 * Until when units a request took may be given back, on the quota's clock: until the end of the
 * window that admitted them, the earliest such end among a stack's fixed windows (-Infinity when
 * the admitting time is not known: none is given back); a quota with no fixed window, at any time
 * (a bucket never holds more than its capacity; a sliding window's count weighs the window before).
 */
function returnDeadline (gate: RouteGate, decidedAt: number | undefined): number {
  const policies = gate.stacked === undefined ? [gate.policy!] : gate.stacked.stack.policies
  let deadline = Infinity
  for (const policy of policies) {
    if (policy.algorithm !== 'fixed-window') continue
    if (decidedAt === undefined) return -Infinity
    deadline = Math.min(deadline, (Math.floor(decidedAt / policy.windowMs) + 1) * policy.windowMs)
  }
  return deadline
}
