import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction, RouteOptions } from 'fastify'
import type { Policy } from '../core/rates/types.js'
import { LoginAttempts } from './plan/login-attempts.js'
import { chargeAfterResponse } from './plan/charge-after-response.js'
import { Groups } from './quotas/groups.js'
import { isTiers, type Limits, type StackLimits } from './options/limits.js'
import { onRequestHook, preHandlerHook } from './on-request.js'
import { onResponseHook } from './on-response.js'
import { validateRouteOptions, type RouteSettings, type Settings } from './options/options.js'
import type { Plan, Planner, RouteSpec } from './plan/planner.js'
import { PRIORITY_NAMES, type Priority } from './release/priority.js'
import { leadPolicy, openLimits, type OpenedLimits, type Quotas } from './quotas/quotas.js'
import type { Permit } from './release/permit.js'
import { reportAtReady, type RouteRecord } from './route-record.js'
import { declaredHandler, watchHandler } from './release/permit.js'
import { UNGATED } from '../pressure/status-route.js'
import { routeGate, type RouteGate } from './route-gate.js'
import { StackedQuota } from './quotas/stacked-quota.js'
import type { BackendLimiter } from '../rates/backend.js'
import type { LongLivedKind } from './release/long-lived.js'
import { AdmissionOptionError } from './errors.js'
import { ObservedWait } from './release/observed-wait.js'
import type { ClientSlots } from './release/client-slots.js'
import type { ClientSlotBook } from '../rates/backend.js'

/** A client's in-flight limit and the slots it counts in. */
interface ClientInFlight { readonly limit: number, readonly slots: ClientSlots | ClientSlotBook }

type Hook = (...args: never[]) => unknown

/** What a route declaration says, whether seen at `onRoute` or found at its first request. */
interface Declared {
  readonly methods: readonly string[]
  readonly url: string
  readonly config: unknown
  readonly handlerTimeout: number | undefined
  /** The handler, to tell GET's automatic HEAD twin (same handler) from a HEAD route of its own. */
  readonly handler: unknown
  /** What other plugins' route options say of its requests becoming long-lived. */
  readonly longLived: LongLivedKind | undefined
}

/**
 * Puts the gate on routes. Every route gets a plan of its own (its counters, its semaphore, its
 * quota); GET and the HEAD route Fastify adds for it share one, as they share a resource.
 *
 * A route a registration of this plugin saw declared (the application's record holds it) gets the
 * gate as hooks of its own, whatever the order of declaration and registration: an opted-out route
 * runs nothing of this plugin. A route no registration saw (declared before the first one ran:
 * before `register`, or in the same tick as a `register` not awaited) can only be reached by hooks
 * of the registering context, which Fastify gives every route of the context and of its children
 * whenever declared: `onRequest`, `preHandler` and `onResponse` there find its plan at its first
 * request. Such a route has no hooks of its own: login throttling counts its failed responses when
 * its permit ends (its response written), not in an `onSend` of the route — an `onSend` hook on
 * every route of the context would change how Fastify sends theirs — and its handler is not
 * followed (its permit ends with its response, or its connection).
 */
export class RouteWiring {
  /** Gates by name, as `stats().routes` lists them. */
  readonly gates = new Map<string, RouteGate>()
  /** Plans by their route's name (`app.admission.plan()`). */
  readonly plans = new Map<string, Plan>()
  private readonly settings: Settings
  private readonly quotas: Quotas
  private readonly shared: OpenedLimits
  private readonly log: FastifyBaseLogger
  private readonly planner: Planner
  private readonly serverTimeout: number | undefined
  private readonly field: symbol
  private readonly record: RouteRecord
  private readonly kPlan = Symbol('admission.plan')
  private readonly groups: Groups
  /** GET routes by URL, with the handler they were given: their HEAD twin shares their plan. */
  private readonly getRoutes = new Map<string, { handler: unknown, plan: Plan | false }>()
  /** Routes wired with hooks of their own after their context's config was made, by `METHOD /url`: the context's hooks pass them by. */
  private readonly ownHooks = new Set<string>()
  private readonly onResponse: Hook
  /** How deep the registering context sits: an outer registration's hooks run before an inner one's. */
  private readonly depth: number
  /** The plugin's `clientInFlight`, counted across the routes without one of their own; undefined without it. */
  private readonly clients: ClientInFlight | undefined
  /** Per-client slots at an address (`'*'`: the plugin's; a route's name): this process's, or the fleet's on a shared backend. */
  private readonly clientSlots: (address: string) => ClientSlots | ClientSlotBook

  constructor (parts: { settings: Settings, quotas: Quotas, shared: OpenedLimits, planner: Planner, log: FastifyBaseLogger, field: symbol, serverTimeout: number | undefined, depth: number, record: RouteRecord, clientSlots: (address: string) => ClientSlots | ClientSlotBook }) {
    this.settings = parts.settings
    this.quotas = parts.quotas
    this.shared = parts.shared
    this.planner = parts.planner
    this.log = parts.log
    this.field = parts.field
    this.serverTimeout = parts.serverTimeout
    this.record = parts.record
    this.groups = new Groups(parts.quotas)
    this.onResponse = onResponseHook(parts.field)
    this.depth = parts.depth
    this.clientSlots = parts.clientSlots
    const limit = parts.settings.clientInFlight
    this.clients = limit === false ? undefined : { limit, slots: parts.clientSlots('*') }
  }

  /**
   * A route a registration saw declared: the gate's hooks become the route's own. `declaredNow`:
   * seen at this registration's `onRoute` (its handler can still be followed); otherwise declared
   * earlier, its context already made, so the context's hooks (if any) are told to pass it by.
   */
  wire (route: RouteOptions, declaredNow: boolean): void {
    const plan = this.seen(route, declaredNow)
    if (!declaredNow) this.ownHooks.add(routeKey(route.method, route.url))
    else if (this.record.contextGates.length !== 0) this.passBy(route)
    if (plan === false) return
    const field = this.field
    route.onRequest = first(onRequestHook(plan, field), route.onRequest, this.depth) as RouteOptions['onRequest']
    route.onResponse = first(this.onResponse, route.onResponse, this.depth) as RouteOptions['onResponse']
    this.wireExtras(route, plan)
    if (declaredNow) watchHandler(this.record.fields, route)
  }

  /** Context hooks of this registration or another pass the route by: it has hooks of its own (Fastify copies the route's `config` into its context). */
  private passBy (route: RouteOptions): void {
    route.config = { ...(route.config as object | undefined), [kOwnHooks]: true } as RouteOptions['config']
  }

  /** The plan of the request's route, for the context's hooks: made at its first request; null where the route is not theirs. */
  readonly planOf = (request: FastifyRequest): Plan | null => {
    const config = request.routeOptions.config as Record<string | symbol, unknown> & { url?: string, method?: string | string[] }
    const known = config[this.kPlan] as Plan | null | undefined
    if (known !== undefined) return known
    // Requests that matched no route take the not-found handler's path (`app.admission.notFound`).
    if (config.url === undefined || config[kOwnHooks] === true || this.ownHooks.has(routeKey(config.method!, config.url))) {
      config[this.kPlan] = null
      return null
    }
    let plan: Plan | null
    const methods = Array.isArray(config.method) ? config.method : [config.method!]
    try {
      const options = request.routeOptions
      plan = this.planOfDeclared({ methods, url: config.url, config, handlerTimeout: options.handlerTimeout, handler: options.handler, longLived: undefined }, false, true) || null
    } catch (error) {
      // Bad options on a route declared before the plugin: its requests are answered 500 with the error, logged once.
      this.log.error({ err: error }, `fastify-admission: ${(error as Error).message}; the route's requests are answered 500 until it is fixed`)
      plan = failingPlan(error as Error)
    }
    config[this.kPlan] = plan
    return plan
  }

  /** A route a registration saw declared: its plan, or false (opted out, or bad options: reported at ready()). */
  private seen (route: RouteOptions, watched: boolean): Plan | false {
    try {
      return this.planOfDeclared(declaredBy(route), watched, false)
    } catch (error) {
      reportAtReady(this.record, error as Error)
      return false
    }
  }

  /** The preHandler, the login route's `onSend`, the watched handler: what a plan needs of the route beyond the two hooks. */
  private wireExtras (route: RouteOptions, plan: Plan): void {
    const field = this.field
    // After the route's own preHandlers (authentication among them), as @fastify/rate-limit does.
    if (plan.preHandler !== undefined) route.preHandler = last(preHandlerHook(plan.preHandler, field), route.preHandler) as RouteOptions['preHandler']
    const failures = plan.failures
    if (failures !== undefined) {
      // Last among the route's onSend hooks: the status it sees is the one sent.
      const counting = function admissionCountFailure (request: FastifyRequest, _reply: FastifyReply, payload: unknown, done: (error: null, payload: unknown) => void): void {
        const permit = (request as unknown as Record<symbol, Permit | null | undefined>)[field]
        const told = permit === null || permit === undefined ? undefined : failures.sending(permit)
        if (told === undefined) done(null, payload)
        else told.then(() => { done(null, payload) })
      }
      route.onSend = last(counting, route.onSend) as RouteOptions['onSend']
    }
  }

  /** The plan of a declared route (a HEAD twin shares its GET's); false for a route opted out or with bad options. */
  private planOfDeclared (route: Declared, watched: boolean, late: boolean): Plan | false {
    const name = this.uniqueName(`${route.methods.join(',')} ${route.url}`)
    const twin = route.methods.length === 1 && route.methods[0] === 'HEAD' ? this.getRoutes.get(route.url) : undefined
    if (twin !== undefined && (twin.handler === route.handler || late)) return twin.plan
    const plan = this.planRoute(route, name, watched, late)
    if (route.methods.includes('GET')) this.getRoutes.set(route.url, { handler: route.handler, plan })
    return plan
  }

  private planRoute (route: Declared, name: string, watched: boolean, late: boolean): Plan | false {
    const settings = this.settings
    const config = route.config as { admission?: unknown, [UNGATED]?: true } | undefined
    const own = config?.[UNGATED] === true ? false : config?.admission
    const waits = Number(route.handlerTimeout ?? this.serverTimeout) > 0
    const parsed = own === undefined ? pluginRoute(settings) : validateRouteOptions(own, name, settings)
    if (parsed === false) return false
    const limits = parsed.rateLimit ?? settings.rateLimit
    const loginAttempts = parsed.count === 'failures'
    const path = `config.admission of ${name}.rateLimit`
    const opened: OpenedLimits = parsed.groupId !== undefined
      ? { limiter: this.groups.open(parsed.groupId, limits as Readonly<Policy> | StackLimits, name, `config.admission of ${name}.groupId`), tiers: undefined }
      : parsed.rateLimit === undefined && !loginAttempts ? this.shared : openLimits(this.quotas, name, limits, loginAttempts, path)
    const gate = routeGate({ name, url: route.url, maxInFlight: parsed.maxInFlight, limiter: opened.limiter, stacked: stackOf(opened.limiter), policy: leadPolicy(limits), cost: parsed.cost, headers: settings.headers, tiers: tierNames(limits) })
    const longLived = parsed.longLived === undefined ? route.longLived : parsed.longLived ? 'marked' : undefined
    if (parsed.maxLongLived !== false) {
      if (longLived === undefined) throw new AdmissionOptionError(`config.admission of ${name}.maxLongLived`, 'absent on a route whose requests are not long-lived (a websocket route, an @fastify/sse route, or one with longLived: true)', parsed.maxLongLived)
      gate.maxLongLived = parsed.maxLongLived
    }
    this.gates.set(name, gate)
    const tiers = this.tiersOf(name, route.url, opened, limits, parsed.cost)
    return this.planned(name, {
      gate,
      tiers,
      charge: parsed.charge === undefined ? undefined : chargeAfterResponse(name, parsed.charge, tiers === undefined ? [gate] : [...tiers.gates.values()], settings.backend?.kind ?? 'memory', this.log),
      priority: PRIORITY_NAMES.indexOf(parsed.priority) as Priority,
      enforce: parsed.enforce,
      errorResponseBuilder: parsed.errorResponseBuilder,
      allowList: parsed.allowList,
      onBackendError: parsed.onBackendError,
      preHandler: parsed.hook === 'preHandler',
      failures: loginAttempts ? new LoginAttempts({ quota: opened.limiter as StackedQuota, failed: parsed.failed!, cost: parsed.cost, log: this.log, route: name, formats: settings.headerFormats, partitionKey: settings.partitionKey }) : undefined,
      byContext: late,
      waitsForHandler: waits,
      handlerWatched: watched,
      notFound: false,
      longLived,
      neverLongLived: parsed.longLived === false,
      observedWait: parsed.observedWait ? new ObservedWait() : undefined,
      // A route's own limit counts its requests apart; without one, the plugin's counts them with its other routes'.
      clientInFlight: parsed.clientInFlight === undefined ? this.clients : parsed.clientInFlight === false ? undefined : { limit: parsed.clientInFlight, slots: this.clientSlots(name) }
    })
  }

  /** The plan of requests that matched no route (`app.admission.notFound`), on the plugin's shared quota. */
  notFoundPlan (): Plan {
    const settings = this.settings
    const gate = routeGate({ name: '404', limiter: this.shared.limiter, stacked: stackOf(this.shared.limiter), policy: leadPolicy(settings.rateLimit), cost: settings.cost, headers: settings.headers, tiers: tierNames(settings.rateLimit) })
    this.gates.set(gate.name, gate)
    return this.planned(gate.name, {
      gate,
      tiers: this.tiersOf('404', undefined, this.shared, settings.rateLimit, settings.cost),
      priority: 0,
      enforce: settings.enforce,
      errorResponseBuilder: settings.errorResponseBuilder,
      allowList: settings.allowList,
      onBackendError: settings.onBackendError,
      preHandler: false,
      failures: undefined,
      byContext: false,
      charge: undefined,
      waitsForHandler: false,
      handlerWatched: true,
      notFound: true,
      longLived: undefined,
      neverLongLived: true,
      observedWait: undefined,
      clientInFlight: undefined
    })
  }

  private planned (name: string, spec: RouteSpec): Plan {
    const plan = this.planner.plan(spec)
    this.plans.set(name, plan)
    return plan
  }

  /**
   * With tiers, a gate per tier besides the route's (named `<route> (tier <name>)` in
   * `stats().routes`, each with its quota, headers and counters).
   */
  private tiersOf (name: string, url: string | undefined, opened: OpenedLimits, limits: Limits | false, cost: number): { tier: (request: FastifyRequest) => string, gates: ReadonlyMap<string, RouteGate> } | undefined {
    if (opened.tiers === undefined || limits === false || !isTiers(limits)) return undefined
    const gates = new Map<string, RouteGate>()
    for (const [tier, limiter] of opened.tiers) {
      const tierGate = routeGate({ name: `${name} (tier ${tier})`, url, limiter, stacked: stackOf(limiter), policy: leadPolicy(limits.tiers.get(tier)!), cost, headers: this.settings.headers, headerName: tier })
      gates.set(tier, tierGate)
      this.gates.set(tierGate.name, tierGate)
    }
    return { tier: limits.tier, gates }
  }

  /** Two routes with one method and URL (constraints tell them apart) get `#2`, `#3`… */
  private uniqueName (name: string): string {
    if (!this.gates.has(name)) return name
    let n = 2
    while (this.gates.has(`${name} #${n}`)) n++
    return `${name} #${n}`
  }
}

/** The limiter when it is a stack of policies (a gate's fields list each). */
function stackOf (limiter: BackendLimiter | undefined): StackedQuota | undefined {
  return limiter instanceof StackedQuota ? limiter : undefined
}

/** A tiered route's own gate counts what happens before a tier is picked: its policies are the tiers. */
function tierNames (limits: Limits | false): readonly string[] | undefined {
  return limits !== false && isTiers(limits) ? [...limits.tiers.keys()] : undefined
}

/** The plan of a route whose options are not valid: every request is answered with the error (a 500). */
function failingPlan (error: Error): Plan {
  const gate = routeGate({ name: 'invalid' })
  const invalidOptions = (permit: Permit): boolean => {
    permit.fail(error)
    return false
  }
  return { gate, onRequest: [invalidOptions], preHandler: undefined, ended: () => {}, failures: undefined, byContext: true, waitsForHandler: false, handlerWatched: false, longLived: undefined }
}

function declaredBy (route: RouteOptions): Declared {
  const others = route as { websocket?: unknown, wsHandler?: unknown, sse?: unknown }
  return {
    methods: Array.isArray(route.method) ? route.method : [route.method],
    url: route.url,
    config: route.config,
    handlerTimeout: (route as { handlerTimeout?: number }).handlerTimeout,
    handler: declaredHandler(route),
    // @fastify/websocket's route options, and @fastify/sse's.
    longLived: others.websocket === true || typeof others.wsHandler === 'function' ? 'upgrade' : others.sse !== undefined && others.sse !== false ? 'stream' : undefined
  }
}

/** The settings of a route without `config.admission`: the plugin's. */
function pluginRoute (settings: Settings): RouteSettings {
  return {
    maxInFlight: false,
    observedWait: false,
    priority: 'normal',
    rateLimit: undefined,
    cost: settings.cost,
    groupId: undefined,
    hook: settings.hook,
    enforce: settings.enforce,
    errorResponseBuilder: settings.errorResponseBuilder,
    allowList: settings.allowList,
    onBackendError: settings.onBackendError,
    count: 'requests',
    failed: undefined,
    charge: undefined,
    longLived: undefined,
    maxLongLived: false,
    clientInFlight: undefined
  }
}

/** The route's hooks of one kind with `hook` after the route's own ones (a nested registration's come after an outer one's). */
function last (hook: Hook, existing: unknown): Hook[] {
  return existing === undefined ? [hook] : Array.isArray(existing) ? [...(existing as Hook[]), hook] : [existing as Hook, hook]
}

/** On a route's config: the route has hooks of its own, which context hooks of the plugin pass by. */
const kOwnHooks = Symbol.for('fastify-admission.own-hooks')

function routeKey (method: string | string[], url: string): string {
  return `${[method].flat().join(',')} ${url}`
}

/** Marks this plugin's hooks with their registration's depth, so that an outer registration's come first. */
const kOurs = Symbol.for('fastify-admission.hook-depth')

/**
 * The route's hooks of one kind with `hook` ahead of the route's own ones, after those of
 * registrations of this plugin in enclosing contexts (whichever was loaded first): the outer
 * gate decides first.
 */
function first (hook: Hook, existing: unknown, depth: number): Hook[] {
  (hook as unknown as Record<symbol, number>)[kOurs] = depth
  const hooks = existing === undefined ? [] : Array.isArray(existing) ? [...(existing as Hook[])] : [existing as Hook]
  let at = 0
  while (at < hooks.length && ((hooks[at] as unknown as Record<symbol, number | undefined>)[kOurs] ?? Infinity) <= depth) at++
  hooks.splice(at, 0, hook)
  return hooks
}

export type { HookHandlerDoneFunction }
