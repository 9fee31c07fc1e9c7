import type { FastifyBaseLogger, FastifyRequest } from 'fastify'
import { Contained } from '../../callbacks/contained.js'
import type { Pressure } from '../../pressure/pressure.js'
import type { AllowMatcher } from '../options/allow-list.js'
import type { ErrorResponseBuilder } from '../options/error-response.js'
import type { FailureCount } from './login-attempts.js'
import type { ChargeAfterWork } from './charge-after-work.js'
import { rawRefusal } from '../outcomes/raw-refusal.js'
import { Outcomes, type OutcomeContext, type Refusals, type Step } from '../outcomes/recorder.js'
import { builder, json, problem, text, throughErrors, throughReply, type Refuse } from '../outcomes/refusal-styles.js'
import { CRITICAL, SHEDDABLE, type Priority } from '../release/priority.js'
import type { AdaptiveSampler } from '../release/adaptive-sampler.js'
import type { EndListener, Permit, PermitRoute } from '../release/permit.js'
import type { Slots, Take } from '../release/slots.js'
import { longLivedStep, type LongLivedConnections, type LongLivedKind } from '../release/long-lived.js'
import type { RouteGate } from '../route-gate.js'
import { allowFirstStep, allowListStep } from './steps/allow-list.js'
import { clientKeyStep } from './steps/client-key.js'
import { exposedStep, headersLaterStep, headersNowStep, partitionKeyStep, policyOnlyStep, stackHeadersLaterStep, stackHeadersNowStep } from './steps/headers.js'
import type { PartitionKey } from '../quotas/partition-key.js'
import { fullGateStep, inFlightStep } from './steps/in-flight.js'
import { pressureStep } from './steps/pressure.js'
import { decidedAtStep, decideLaterStep, decideNowStep, verdictStep } from './steps/quota.js'
import { tierStep, type Tier } from './steps/tier.js'

/**
 * A route's plan: its steps, assembled once from the features the route uses (an off feature is
 * absent, not a branch taken per request), and what the route does when a permit ends.
 */
export interface Plan extends PermitRoute {
  /** What runs in `onRequest`: shed, then (unless it runs in `preHandler`) limit. */
  readonly onRequest: Step
  /** Login throttling: failed responses take from the quota (counted in `onSend`). */
  readonly failures: FailureCount | undefined
}

/** What one route asks for, once its options are read. */
export interface RouteSpec {
  readonly gate: RouteGate
  /** Tiers: `tier(request)` picks one of these gates (each with its own quota). */
  readonly tiers: { readonly tier: (request: FastifyRequest) => string, readonly gates: ReadonlyMap<string, RouteGate> } | undefined
  readonly priority: Priority
  readonly enforce: boolean
  readonly errorResponseBuilder: ErrorResponseBuilder | undefined
  readonly allowList: AllowMatcher | undefined
  /** The route's answer to a backend that cannot decide. */
  readonly onBackendError: 'deny' | 'allow'
  /** The rate check runs in `preHandler`. */
  readonly preHandler: boolean
  readonly failures: FailureCount | undefined
  /**
   * The route is reached by the registering context's hooks (no registration saw it declared: it
   * has no hooks of its own). Login throttling then counts a failed response when its permit ends.
   */
  readonly byContext: boolean
  /** Charging after the response (`config.admission.charge`). */
  readonly charge: ChargeAfterWork | undefined
  readonly waitsForHandler: boolean
  readonly handlerWatched: boolean
  /** Requests that matched no route: they hold no slot, and are refused while the global gate is full. */
  readonly notFound: boolean
  /** How the route's requests become long-lived, when its declaration says they do. */
  readonly longLived: LongLivedKind | undefined
  /** `config.admission.longLived: false`: a reply of the route is never long-lived, not even an event stream. */
  readonly neverLongLived: boolean
}

/** What the planner takes from the registration. */
export interface PlanParts {
  readonly outcomes: OutcomeContext
  readonly slots: Slots
  readonly longLived: LongLivedConnections
  /** The global gate exists (`maxInFlight` is not false). */
  readonly globalGate: boolean
  readonly sampler: AdaptiveSampler | undefined
  readonly pressure: Pressure | undefined
  readonly headers: boolean
  /** `pk` on every `RateLimit` item (`headers.partitionKey`), or undefined. */
  readonly partitionKey: PartitionKey | undefined
  readonly keyOf: (request: FastifyRequest) => string
  readonly allowListSkipsShedding: boolean
  readonly responseBody: 'json' | 'text' | 'problem' | 'error'
  /** Which built-in refusals are written from precomputed bytes (`fastRefusals`). */
  readonly fastRefusals: 'shed' | 'all' | false
  readonly log: FastifyBaseLogger
}

/**
 * Assembles plans for one registration. Each route's application callbacks get their error
 * boundary (`Contained`) here, one per callback and route, so that a failure is logged once for
 * the route it failed on.
 */
export class Planner {
  private readonly parts: PlanParts
  /** The registration's built-in refusals, shared by every route without a builder. */
  private readonly builtIn: Refusals

  constructor (parts: PlanParts) {
    this.parts = parts
    const style = parts.responseBody === 'problem' ? problem : parts.responseBody === 'text' ? text : json
    const reply = parts.responseBody === 'error' ? throughErrors : throughReply(style)
    const fast = parts.fastRefusals === false ? reply : rawRefusal(style)
    this.builtIn = Object.freeze({ shed: fast, limited: parts.fastRefusals === 'all' ? fast : reply, unavailable: parts.fastRefusals === 'all' ? fast : reply })
  }

  plan (spec: RouteSpec): Plan {
    const parts = this.parts
    const route = spec.gate.name
    const outcomes = new Outcomes(parts.outcomes, spec.enforce, spec.onBackendError, this.style(spec.errorResponseBuilder, route), route, parts.headers)
    const gate = spec.gate
    // An admission that carries the quota's fields exposes them to pages of other origins.
    const admitted: Step = gate.limiter !== undefined && parts.headers ? exposedStep(outcomes.admitted) : outcomes.admitted
    // A route that charges after the work notes when its quota decided (a window's units go back only in it).
    const stamped = spec.charge !== undefined
    const checked: Step = gate.limiter === undefined ? admitted : this.quota(gate, outcomes, admitted, stamped)
    // Login throttling (never with tiers): the attempt counts from the moment its check is sent,
    // not when the answer comes back, so that a burst of checks on their way sees one another.
    let rate = spec.failures === undefined ? checked : spec.failures.step(checked)
    if (gate.limiter !== undefined && spec.tiers !== undefined) {
      const tiers = new Map<string, Tier>()
      for (const [name, tierGate] of spec.tiers.gates) tiers.set(name, { gate: tierGate, decide: this.quota(tierGate, outcomes, admitted, stamped) })
      rate = tierStep(spec.tiers.tier, tiers, this.contained('tier', route, 'answering 500 with its error (without a tier there is no quota to decide on)'))
    }
    const allows = spec.allowList
    const keyed = gate.limiter !== undefined || allows !== undefined
    const listed = this.contained('allowList', route, 'answering 500 with its error')
    const keyOf = parts.keyOf
    const key = (next: Step): Step => clientKeyStep(keyOf, this.contained('key', route, 'answering 500 with its error (without a key there is no quota to decide on)'), next)
    const pressured = (next: Step): Step => this.pressured(outcomes, route, next)
    const ended = this.ended(spec)
    const base = { gate, ended, failures: spec.failures, byContext: spec.byContext, waitsForHandler: spec.waitsForHandler, handlerWatched: spec.handlerWatched, longLived: spec.neverLongLived ? undefined : parts.longLived }
    if (spec.notFound) {
      const screened = allows === undefined ? rate : allowListStep(allows, listed, outcomes, rate)
      const limit = keyed ? key(screened) : screened
      return { ...base, onRequest: pressured(parts.globalGate ? fullGateStep(() => parts.slots.full, outcomes, limit) : limit), preHandler: undefined }
    }
    const take = this.take(spec.priority)
    // After the in-flight permit, a long-lived route's place among the long-lived connections.
    const kind = spec.longLived
    const inFlight = (next: Step): Step => inFlightStep(take, outcomes, kind === undefined ? next : longLivedStep(kind, parts.longLived, outcomes, next))
    if (allows !== undefined && parts.allowListSkipsShedding) {
      return { ...base, onRequest: pressured(key(allowFirstStep(allows, listed, take, outcomes, inFlight(rate)))), preHandler: undefined }
    }
    const screened = allows === undefined ? rate : allowListStep(allows, listed, outcomes, rate)
    const limit = keyed ? key(screened) : screened
    if (spec.preHandler && gate.limiter !== undefined) {
      return { ...base, onRequest: pressured(inFlight(goOn)), preHandler: limit }
    }
    return { ...base, onRequest: pressured(inFlight(limit)), preHandler: undefined }
  }

  /**
   * The quota's steps for a gate: decide (synchronously where the backend can), the headers, the
   * verdict; an admission the backend could not decide (`onBackendError: 'allow'`) carries the
   * policy, the one field known without a decision.
   */
  private quota (gate: RouteGate, outcomes: Outcomes, admitted: Step, stamped: boolean): Step {
    const decide = this.decide(gate, outcomes, admitted)
    return stamped ? decidedAtStep(gate.limiter!, decide) : decide
  }

  private decide (gate: RouteGate, outcomes: Outcomes, admitted: Step): Step {
    const partitionKey = this.parts.partitionKey
    const verdict = partitionKey === undefined ? verdictStep(outcomes, admitted) : partitionKeyStep(partitionKey, verdictStep(outcomes, admitted))
    const next = this.parts.headers ? policyOnlyStep(gate, admitted) : admitted
    const limiter = gate.limiter!
    const stack = gate.stacked
    if (stack !== undefined && stack.verdicts !== undefined) {
      return decideNowStep(gate, stack.verdicts, outcomes, this.parts.headers ? stackHeadersNowStep(gate, stack.sync!, verdict) : verdict, next)
    }
    const sync = limiter.synchronous
    if (sync !== undefined) return decideNowStep(gate, sync, outcomes, this.parts.headers ? headersNowStep(gate, sync, verdict) : verdict, next)
    const headed = !this.parts.headers ? verdict : stack === undefined ? headersLaterStep(gate, verdict) : stackHeadersLaterStep(gate, verdict)
    return decideLaterStep(gate, limiter, outcomes, headed, next)
  }

  /** The slots a route takes, by its priority at the global gate (or only its own, without one). */
  private take (priority: Priority): Take {
    const slots = this.parts.slots
    if (!this.parts.globalGate) return slots.routeOnly
    return priority === CRITICAL ? slots.criticalTake : priority === SHEDDABLE ? slots.sheddable : slots.normal
  }

  /** Pressure first, when the registration has it. */
  private pressured (outcomes: Outcomes, route: string, next: Step): Step {
    const pressure = this.parts.pressure
    return pressure === undefined ? next : pressureStep(pressure, outcomes, this.contained('pressureHandler', route, 'shedding with the pressure 503, as without it'), next)
  }

  /** The error boundary of one callback on one route. */
  private contained (callback: string, route: string, instead: string): Contained {
    return new Contained(this.parts.log, callback, route, instead)
  }

  /**
   * What a permit's end does: the adaptive sampler hears it (before its slot goes back: it
   * completed at that count), the slots, login attempts; on a long-lived route, the place a
   * request took among the long-lived connections goes back unless its long-lived phase began.
   */
  private ended (spec: RouteSpec): EndListener {
    const connections = this.parts.longLived
    const ended = this.endedInFlight(spec)
    if (spec.longLived === undefined) return ended
    return (permit, how) => {
      ended(permit, how)
      if (how !== 'longLived') connections.close(permit)
    }
  }

  private endedInFlight (spec: RouteSpec): EndListener {
    const release = this.parts.slots.release
    const sampler = this.parts.sampler
    const failures = spec.failures
    const sampled: EndListener = sampler === undefined ? release : (permit, how) => { sampler.ended(permit, how); release(permit) }
    const charged: EndListener = spec.charge === undefined ? sampled : chargedAfter(spec.charge.ended, sampled)
    if (failures === undefined) return charged
    if (spec.byContext) {
      return (permit, how) => {
        // Its response written (the handler's, or the handler timeout's): it may be a failure.
        if (how === 'responded' || how === 'timedOut') failures.sending(permit, false)
        else failures.ended(permit)
        charged(permit, how)
      }
    }
    return (permit, how) => {
      failures.ended(permit)
      charged(permit, how)
    }
  }

  /** How the route refuses: the registration's built-in refusals, or the route's builder (over the built-in body, should it fail) for every kind. */
  private style (build: ErrorResponseBuilder | undefined, route: string): Refusals {
    const builtIn = this.builtIn
    if (build === undefined) return builtIn
    const fallback: Refuse = (permit, status, seconds, reason, message, violated) => { builtIn[reason](permit, status, seconds, reason, message, violated) }
    const built: Refuse = builder(build, fallback, this.contained('errorResponseBuilder', route, 'refusing with the built-in body'))
    return { shed: built, limited: built, unavailable: built }
  }
}

/** The slots go back first (a charge may wait for its backend), then the charge is taken. */
function chargedAfter (charge: EndListener, released: EndListener): EndListener {
  return (permit, how) => {
    released(permit, how)
    charge(permit, how)
  }
}

/** The end of the `onRequest` part when the rate check runs in `preHandler`: on to the route's next hook. */
function goOn (permit: Permit): void {
  permit.done()
}
