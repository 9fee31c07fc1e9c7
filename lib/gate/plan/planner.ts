import type { FastifyBaseLogger, FastifyRequest } from 'fastify'
import { Contained } from '../../callbacks/contained.js'
import type { Pressure } from '../../pressure/pressure.js'
import type { AllowMatcher } from '../options/allow-list.js'
import type { ErrorResponseBuilder } from '../options/error-response.js'
import type { LoginAttempts } from './login-attempts.js'
import type { ChargeAfterResponse } from './charge-after-response.js'
import { rawRefusal } from '../outcomes/raw-refusal.js'
import { Outcomes, type OutcomeContext, type Refusals } from '../outcomes/recorder.js'
import { builder, json, problem, text, throughErrors, throughReply, type Refuse } from '../outcomes/refusal-styles.js'
import { CRITICAL, SHEDDABLE, type Priority } from '../release/priority.js'
import type { AdaptiveSampler } from '../release/adaptive-sampler.js'
import type { EndListener, Permit } from '../release/permit.js'
import type { ObservedWait } from '../release/observed-wait.js'
import type { Slots, Take } from '../release/slots.js'
import type { LongLivedConnections, LongLivedKind } from '../release/long-lived.js'
import type { RouteGate } from '../route-gate.js'
import type { PartitionKey } from '../headers/partition-key.js'
import { expiringLimitWriter, olderPolicyHeader, type ExpiringLimit, type HeaderFormat } from '../headers/header-formats.js'
import { expiringLaterStep, expiringNowStep, olderPolicyStep, stackExpiringLaterStep, stackExpiringNowStep } from './format-steps.js'
import { StepList, type Plan, type Step } from './plan.js'
import {
  admitStep, allowFirstStep, allowListStep, clientInFlightLaterStep, clientInFlightStep, clientKeyStep, decidedAtStep, decideLaterStep, decideNowStep, exposedStep,
  headersLaterStep, headersNowStep, inFlightStep, loginAttemptStep, longLivedStep, onToPreHandlerStep, partitionKeyStep,
  pressureStep, retryAttemptStep, stackHeadersLaterStep, stackHeadersNowStep, tierStep, verdictStep, whileFullStep
} from './steps.js'
import type { RetrySettings } from '../options/retries-option.js'
import { ClientSlots } from '../release/client-slots.js'
import type { ClientSlotBook } from '../../rates/backend.js'
import { retryLimit } from '../../core/attempt.js'
import { SHED_REASONS, type Reason } from '../../metrics/reasons.js'
import { expectRefusals } from './refusal-reasons.js'

export type { Plan }

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
  readonly failures: LoginAttempts | undefined
  /**
   * The route is reached by the registering context's hooks (no registration saw it declared: it
   * has no hooks of its own). Login throttling then counts a failed response when its permit ends.
   */
  readonly byContext: boolean
  /** Charging after the response (`config.admission.charge`). */
  readonly charge: ChargeAfterResponse | undefined
  readonly waitsForHandler: boolean
  readonly handlerWatched: boolean
  /** Requests that matched no route: they hold no slot, and are refused while the global gate is full. */
  readonly notFound: boolean
  /** How the route's requests become long-lived, when its declaration says they do. */
  readonly longLived: LongLivedKind | undefined
  /** `config.admission.longLived: false`: a reply of the route is never long-lived, not even an event stream. */
  readonly neverLongLived: boolean
  /** A full route semaphore advertises its observed wait (`maxInFlight: { retryAfter: 'observed' }`): its durations are sampled as its permits end. */
  readonly observedWait: ObservedWait | undefined
  /** A client's in-flight limit on the route (`clientInFlight`) and the slots it counts in, or undefined. */
  readonly clientInFlight: { readonly limit: number, readonly slots: ClientSlots | ClientSlotBook } | undefined
}

/** What the planner takes from the registration. */
export interface PlanParts {
  readonly outcomes: OutcomeContext
  readonly slots: Slots
  readonly longLived: LongLivedConnections
  /** The global gate exists (`maxInFlight` is not false). */
  readonly globalGate: boolean
  /** Why the global gate is full, when it is: its own limit (`in-flight`), a fleet's share (`fleet-in-flight`), or either. */
  readonly fullGate: readonly Reason[]
  readonly sampler: AdaptiveSampler | undefined
  readonly pressure: Pressure | undefined
  /** Retries shed first (`retries`), or undefined. */
  readonly retries: RetrySettings | undefined
  readonly headers: boolean
  /** The header formats sent (`headers.format`; none with `headers: false`). */
  readonly formats: readonly HeaderFormat[]
  /** `pk` on every `RateLimit` item (`headers.partitionKey`), or undefined. */
  readonly partitionKey: PartitionKey | undefined
  readonly keyOf: (request: FastifyRequest) => string
  readonly allowListSkipsShedding: boolean
  readonly responseBody: 'json' | 'text' | 'problem' | 'error'
  /** Which built-in refusals are written from precomputed bytes (`refusal.fast`). */
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
  /** Draft 11's fields are sent (the default). */
  private readonly draft11: boolean
  /** The writer of the older formats sent (drafts 6 and 7, `x-ratelimit`), chosen once; undefined for none. */
  private readonly older: ExpiringLimit | undefined
  /** What pressure may shed every route for. */
  private readonly pressureReasons: readonly Reason[]

  constructor (parts: PlanParts) {
    this.parts = parts
    this.draft11 = parts.formats.includes('draft-11')
    this.older = expiringLimitWriter(parts.formats)
    this.pressureReasons = parts.pressure === undefined ? [] : parts.pressure.reasons().map((why) => SHED_REASONS[why])
    const style = parts.responseBody === 'problem' ? problem : parts.responseBody === 'text' ? text : json
    const reply = parts.responseBody === 'error' ? throughErrors : throughReply(style)
    const fast = parts.fastRefusals === false ? reply : rawRefusal(style)
    this.builtIn = Object.freeze({ shed: fast, limited: parts.fastRefusals === 'all' ? fast : reply, unavailable: parts.fastRefusals === 'all' ? fast : reply })
  }

  plan (spec: RouteSpec): Plan {
    const parts = this.parts
    const route = spec.gate.name
    const observed = spec.observedWait
    const routeWait = observed === undefined ? undefined : (permit: Permit): number => observed.seconds(permit.route)
    const login = spec.failures !== undefined
    const outcomes = new Outcomes(parts.outcomes, { route, enforce: spec.enforce, onBackendError: spec.onBackendError, refusals: this.style(spec.errorResponseBuilder, route), inFlightHeaders: this.draft11, login, routeWait })
    const gate = spec.gate
    const allows = spec.allowList
    const clients = spec.notFound ? undefined : spec.clientInFlight
    expectRefusals(gate, {
      pressure: this.pressureReasons,
      enforce: spec.enforce,
      failsClosed: spec.onBackendError === 'deny',
      globalGate: parts.globalGate ? parts.fullGate : [],
      retries: parts.retries !== undefined,
      longLived: spec.longLived !== undefined && parts.longLived.limit !== 0,
      clientInFlight: clients === undefined ? undefined : clients.slots instanceof ClientSlots ? 'process' : 'fleet',
      login,
      quotas: gate.limiter === undefined ? [] : spec.tiers === undefined ? [gate] : [...spec.tiers.gates.values()]
    })
    const keyed = gate.limiter !== undefined || allows !== undefined || clients !== undefined
    const listed = (): Contained => this.contained('allowList', route, 'answering 500 with its error')
    const key = (): Step => clientKeyStep(parts.keyOf, this.contained('key', route, 'answering 500 with its error (without a key there is no quota to decide on)'))
    const base = { gate, ended: this.ended(spec), failures: spec.failures, byContext: spec.byContext, waitsForHandler: spec.waitsForHandler, handlerWatched: spec.handlerWatched, longLived: spec.neverLongLived ? undefined : parts.longLived }

    // Shed: pressure, then the in-flight slots (a request that matched no route holds none, and
    // is refused while the global gate is full), then a long-lived route's place.
    const onRequest = new StepList()
    const pressure = parts.pressure
    const retry = this.retryStep(spec, outcomes)
    if (retry !== undefined) onRequest.add(retry)
    if (pressure !== undefined) {
      const handler = this.contained('pressureHandler', route, 'shedding with the pressure 503, as without it')
      onRequest.addResuming((rest) => pressureStep(pressure, outcomes, handler, rest))
    }
    const take = this.take(spec.priority)
    const shed = (list: StepList): void => {
      list.add(inFlightStep(take, outcomes))
      if (spec.longLived !== undefined) list.add(longLivedStep(spec.longLived, parts.longLived, outcomes))
    }
    if (spec.notFound) {
      if (parts.globalGate) onRequest.add(whileFullStep(() => parts.slots.full, outcomes))
    } else if (allows !== undefined && parts.allowListSkipsShedding) {
      // The allow list before shedding: the key first, a listed client admitted whatever the gate.
      onRequest.add(key()).add(allowFirstStep(allows, listed(), take, outcomes))
      shed(onRequest)
      if (clients !== undefined) clientStep(clients, outcomes, onRequest)
      this.rate(spec, outcomes, onRequest)
      return { ...base, onRequest: onRequest.steps, preHandler: undefined }
    } else {
      shed(onRequest)
    }

    // Limit: the key, the allow list, then the quota — in onRequest, or after the route's own
    // preHandlers (`hook: 'preHandler'`), where authentication has run.
    const inPreHandler = spec.preHandler && (gate.limiter !== undefined || clients !== undefined) && !spec.notFound
    const limit = inPreHandler ? new StepList() : onRequest
    if (inPreHandler) onRequest.add(onToPreHandlerStep())
    if (keyed) limit.add(key())
    if (allows !== undefined) limit.add(allowListStep(allows, listed(), outcomes))
    if (clients !== undefined) clientStep(clients, outcomes, limit)
    this.rate(spec, outcomes, limit)
    return { ...base, onRequest: onRequest.steps, preHandler: inPreHandler ? limit.steps : undefined }
  }

  /** The quota's steps (a tier's, chosen per request, with tiers), then the admission. */
  private rate (spec: RouteSpec, outcomes: Outcomes, list: StepList): void {
    const gate = spec.gate
    // A route that charges after the work notes when its quota decided (a window's units go back only in it).
    const stamped = spec.charge !== undefined
    if (gate.limiter !== undefined && spec.tiers !== undefined) {
      const tiers = new Map<string, { gate: RouteGate, steps: readonly Step[] }>()
      for (const [name, tierGate] of spec.tiers.gates) tiers.set(name, { gate: tierGate, steps: this.quota(tierGate, outcomes, stamped, new StepList()).steps })
      list.add(tierStep(spec.tiers.tier, tiers, this.contained('tier', spec.gate.name, 'answering 500 with its error (without a tier there is no quota to decide on)')))
      return
    }
    // Login throttling (never with tiers): the attempt counts from the moment its check is sent,
    // not when the answer comes back, so that a burst of checks on their way sees one another.
    if (spec.failures !== undefined) list.add(loginAttemptStep(spec.failures))
    if (gate.limiter === undefined) list.add(admitStep(outcomes))
    else this.quota(gate, outcomes, stamped, list)
  }

  /**
   * A gate's quota: decide (synchronously where the backend can), its fields, the verdict, then
   * the admission (its fields readable by pages of other origins).
   */
  private quota (gate: RouteGate, outcomes: Outcomes, stamped: boolean, list: StepList): StepList {
    const headers = this.parts.headers
    const draft11 = this.draft11
    const older = this.older
    const limiter = gate.limiter!
    const stack = gate.stacked
    if (stamped) list.add(decidedAtStep(limiter))
    const sync = limiter.synchronous
    if (stack !== undefined && stack.verdicts !== undefined) {
      list.add(decideNowStep(gate, stack.verdicts, outcomes))
      if (draft11) list.add(stackHeadersNowStep(gate, stack.sync!))
      if (older !== undefined) list.add(stackExpiringNowStep(gate, stack.sync!, older))
    } else if (sync !== undefined) {
      list.add(decideNowStep(gate, sync, outcomes))
      if (draft11) list.add(headersNowStep(gate, sync))
      if (older !== undefined) list.add(expiringNowStep(gate, sync, older))
    } else {
      list.addResuming((rest) => decideLaterStep(gate, limiter, outcomes, rest))
      if (draft11) list.add(stack === undefined ? headersLaterStep(gate) : stackHeadersLaterStep(gate))
      if (older !== undefined) list.add(stack === undefined ? expiringLaterStep(gate, older) : stackExpiringLaterStep(gate, older))
    }
    const policy = olderPolicyHeader(this.parts.formats, stack === undefined ? [gate.policy!] : stack.stack.policies, gate.cost)
    if (policy !== undefined) list.add(olderPolicyStep(policy))
    const partitionKey = this.parts.partitionKey
    if (draft11 && partitionKey !== undefined) list.add(partitionKeyStep(partitionKey))
    list.add(verdictStep(outcomes))
    if (headers) list.add(exposedStep(this.parts.outcomes.expose))
    return list.add(admitStep(outcomes))
  }

  /**
   * Retries shed first: present only where `retries` is on and the route has something that
   * sheds — the registration's in-flight gate, a semaphore of its own, queueing delay.
   */
  private retryStep (spec: RouteSpec, outcomes: Outcomes): Step | undefined {
    const retries = this.parts.retries
    if (retries === undefined) return undefined
    const slots = this.parts.globalGate ? this.parts.slots : undefined
    const own = spec.gate.maxInFlight
    const routeLimit = own === 0 ? 0 : retryLimit(own, retries.reserve)
    const pressure = this.parts.pressure?.probe === undefined ? undefined : this.parts.pressure
    if (slots === undefined && routeLimit === 0 && pressure === undefined) return undefined
    return retryAttemptStep(retries.header, { slots, routeLimit, pressure }, outcomes)
  }

  /** The slots a route takes, by its priority at the global gate (or only its own, without one). */
  private take (priority: Priority): Take {
    const slots = this.parts.slots
    if (!this.parts.globalGate) return slots.routeOnly
    return priority === CRITICAL ? slots.criticalTake : priority === SHEDDABLE ? slots.sheddable : slots.normal
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
    const ended = this.endedClient(spec, this.endedInFlight(spec))
    if (spec.longLived === undefined) return ended
    return (permit, how) => {
      ended(permit, how)
      if (how !== 'longLived') connections.close(permit)
    }
  }

  /** With `clientInFlight`: the client's slot goes back too, after the route's (once: a permit ends once). */
  private endedClient (spec: RouteSpec, ended: EndListener): EndListener {
    const clients = spec.clientInFlight
    if (clients === undefined || spec.notFound) return ended
    const slots = clients.slots
    return (permit, how) => {
      ended(permit, how)
      if (permit.clientHeld) {
        permit.clientHeld = false
        slots.release(permit.key!)
      }
    }
  }

  private endedInFlight (spec: RouteSpec): EndListener {
    const slots = this.parts.slots.release
    const observed = spec.observedWait
    // The route's durations are sampled before its slot goes back (a waiting client may take it at once).
    const release: EndListener = observed === undefined ? slots : (permit, how) => { observed.ended(permit, how); slots(permit) }
    const sampler = this.parts.sampler
    const failures = spec.failures
    const sampled: EndListener = sampler === undefined ? release : (permit, how) => { sampler.ended(permit, how); release(permit, how) }
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

/** A client's slot: in this process (synchronous), or the fleet's on its backend (by promise). */
function clientStep (clients: NonNullable<RouteSpec['clientInFlight']>, outcomes: Outcomes, list: StepList): void {
  const { slots, limit } = clients
  if (slots instanceof ClientSlots) list.add(clientInFlightStep(slots, limit, outcomes))
  else list.addResuming((rest) => clientInFlightLaterStep(slots, limit, outcomes, rest))
}

/** The slots go back first (a charge may wait for its backend), then the charge is taken. */
function chargedAfter (charge: EndListener, released: EndListener): EndListener {
  return (permit, how) => {
    released(permit, how)
    charge(permit, how)
  }
}

