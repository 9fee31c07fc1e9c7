import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction, RouteOptions } from 'fastify'
import type { Policy } from '../core/rates/types.js'
import { FailureCount } from './plan/login-attempts.js'
import { chargeAfterWork } from './plan/charge-after-work.js'
import { Groups } from './quotas/groups.js'
import { isTiers, type Limits, type StackLimits } from './options/limits.js'
import { onRequestHook, preHandlerHook } from './on-request.js'
import { onResponseHook } from './on-response.js'
import { validateRouteOptions, type RouteSettings, type Settings } from './options/options.js'
import type { Plan, Planner } from './plan/planner.js'
import { PRIORITY_NAMES, type Priority } from './release/priority.js'
import { leadPolicy, openLimits, type OpenedLimits, type Quotas } from './quotas/quotas.js'
import type { Permit } from './release/permit.js'
import { declaredHandler } from './route-record.js'
import { UNGATED } from '../pressure/status-route.js'
import { routeGate, type RouteGate } from './route-gate.js'
import type { StackedQuota } from './quotas/stacked-quota.js'
import type { LongLivedKind } from './release/long-lived.js'
import { AdmissionOptionError } from './errors.js'

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
 * Where the registration sees every route (none was declared before it), the hooks are the
 * route's own, set at `onRoute`: an opted-out route runs nothing of this plugin. Where routes were
 * declared before it (they never pass its `onRoute`: declared before `register`, or in the same
 * tick as a `register` not awaited, or in a context registered first), the `onRequest` and
 * `onResponse` hooks are the registering context's, which Fastify gives every route of the
 * context and of its children whenever declared, and each request finds its route's plan.
 */
export class RouteWiring {
  /** Gates by name, as `stats().routes` lists them. */
  readonly gates = new Map<string, RouteGate>()
  /** Bad route configs, reported at ready() (the first one), where Fastify users expect a bad route to fail. */
  readonly errors: Error[] = []
  private readonly settings: Settings
  private readonly quotas: Quotas
  private readonly shared: OpenedLimits
  private readonly log: FastifyBaseLogger
  private readonly planner: Planner
  private readonly serverTimeout: number | undefined
  private readonly field: symbol
  private readonly kPlan = Symbol('admission.plan')
  private readonly groups: Groups
  /** GET routes by URL, with the handler they were given: their HEAD twin shares their plan. */
  private readonly getRoutes = new Map<string, { handler: unknown, plan: Plan | false }>()
  /** Plans of routes declared before this registration that a registration saw, by `METHOD /url` (context-level hooks find them at the first request). */
  private readonly preplanned = new Map<string, Plan | false>()
  private readonly onResponse: Hook
  /** How deep the registering context sits: an outer registration's hooks run before an inner one's. */
  private readonly depth: number

  constructor (settings: Settings, quotas: Quotas, shared: OpenedLimits, planner: Planner, log: FastifyBaseLogger, field: symbol, serverTimeout: number | undefined, depth: number) {
    this.settings = settings
    this.quotas = quotas
    this.shared = shared
    this.planner = planner
    this.log = log
    this.field = field
    this.serverTimeout = serverTimeout
    this.groups = new Groups(quotas)
    this.onResponse = onResponseHook(field)
    this.depth = depth
  }

  /** `onRoute`, where this registration sees every route: the route's own hooks. */
  wire (route: RouteOptions): void {
    const plan = this.seen(route)
    if (plan === false) return
    const field = this.field
    route.onRequest = first(onRequestHook(plan, field), route.onRequest, this.depth) as RouteOptions['onRequest']
    route.onResponse = first(this.onResponse, route.onResponse, this.depth) as RouteOptions['onResponse']
    this.wireExtras(route, plan)
  }

  /**
   * `onRoute`, where the gate's `onRequest`/`onResponse` are the context's: the plan rides on
   * the route's config (Fastify copies the route's `config` into its context).
   */
  mark (route: RouteOptions): void {
    const plan = this.seen(route)
    route.config = { ...(route.config as object | undefined), [this.kPlan]: plan === false ? null : plan } as RouteOptions['config']
  }

  /**
   * A route declared before this registration, which another registration saw (so its handler
   * is followed): planned now, its options checked at ready(), found at its first request.
   */
  preplan (route: RouteOptions): void {
    const plan = this.seen(route)
    const key = `${Array.isArray(route.method) ? route.method.join(',') : route.method} ${route.url}`
    if (!this.preplanned.has(key)) this.preplanned.set(key, plan)
  }

  /** The plan of the request's route (with context-level hooks), made at its first request if its route was declared before the plugin. */
  readonly planOf = (request: FastifyRequest): Plan | null => {
    const config = request.routeOptions.config as Record<string | symbol, unknown> & { url?: string, method?: string | string[] }
    const known = config[this.kPlan] as Plan | null | undefined
    if (known !== undefined) return known
    // Requests that matched no route take the not-found handler's path (`app.admission.notFound`).
    if (config.url === undefined) return null
    let plan: Plan | null
    const methods = Array.isArray(config.method) ? config.method : [config.method!]
    const preplanned = this.preplanned.get(`${methods.join(',')} ${config.url}`)
    try {
      const options = request.routeOptions
      plan = preplanned !== undefined ? preplanned || null : this.planOfDeclared({ methods, url: config.url, config, handlerTimeout: options.handlerTimeout, handler: options.handler, longLived: undefined }, true) || null
    } catch (error) {
      // Bad options on a route declared before the plugin: its requests are answered 500 with the error, logged once.
      this.log.error({ err: error }, `fastify-admission: ${(error as Error).message}; the route's requests are answered 500 until it is fixed`)
      plan = failingPlan(error as Error)
    }
    config[this.kPlan] = plan
    return plan
  }

  /** A route seen at `onRoute`: its plan, or false (opted out, or bad options: reported at ready()). */
  private seen (route: RouteOptions): Plan | false {
    try {
      return this.planOfDeclared(declaredBy(route))
    } catch (error) {
      this.errors.push(error as Error)
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
  private planOfDeclared (route: Declared, late = false): Plan | false {
    const name = this.uniqueName(`${route.methods.join(',')} ${route.url}`)
    const twin = route.methods.length === 1 && route.methods[0] === 'HEAD' ? this.getRoutes.get(route.url) : undefined
    if (twin !== undefined && (twin.handler === route.handler || late)) return twin.plan
    const plan = this.planRoute(route, name, late)
    if (route.methods.includes('GET')) this.getRoutes.set(route.url, { handler: route.handler, plan })
    return plan
  }

  private planRoute (route: Declared, name: string, late: boolean): Plan | false {
    const settings = this.settings
    const config = route.config as { admission?: unknown, [UNGATED]?: true } | undefined
    const own = config?.[UNGATED] === true ? false : config?.admission
    const waits = Number(route.handlerTimeout ?? this.serverTimeout) > 0
    const parsed = own === undefined ? pluginRoute(settings) : validateRouteOptions(own, name, settings)
    if (parsed === false) return false
    const limits = parsed.rateLimit ?? settings.rateLimit
    const dry = parsed.count === 'failures'
    const path = `config.admission of ${name}.rateLimit`
    const opened: OpenedLimits = parsed.groupId !== undefined
      ? { limiter: this.groups.open(parsed.groupId, limits as Readonly<Policy> | StackLimits, name, `config.admission of ${name}.groupId`), tiers: undefined }
      : parsed.rateLimit === undefined && !dry ? this.shared : openLimits(this.quotas, name, limits, dry, path)
    const gate = routeGate(name, route.url, parsed.maxInFlight, opened.limiter, leadPolicy(limits), parsed.cost, settings.headers, undefined, tierNames(limits))
    const longLived = parsed.longLived === undefined ? route.longLived : parsed.longLived ? 'marked' : undefined
    if (parsed.maxLongLived !== false) {
      if (longLived === undefined) throw new AdmissionOptionError(`config.admission of ${name}.maxLongLived`, 'absent on a route whose requests are not long-lived (a websocket route, an @fastify/sse route, or one with longLived: true)', parsed.maxLongLived)
      gate.maxLongLived = parsed.maxLongLived
    }
    this.gates.set(name, gate)
    const tiers = this.tiersOf(name, route.url, opened, limits, parsed.cost)
    return this.planner.plan({
      gate,
      tiers,
      charge: parsed.charge === undefined ? undefined : chargeAfterWork(name, parsed.charge, tiers === undefined ? [gate] : [...tiers.gates.values()], settings.backend?.kind ?? 'memory', this.log),
      priority: PRIORITY_NAMES.indexOf(parsed.priority) as Priority,
      enforce: parsed.enforce,
      errorResponseBuilder: parsed.errorResponseBuilder,
      allowList: parsed.allowList,
      onBackendError: parsed.onBackendError,
      preHandler: parsed.hook === 'preHandler',
      failures: dry ? new FailureCount(opened.limiter as StackedQuota, parsed.failed!, parsed.cost, this.log, name, settings.headers, settings.partitionKey) : undefined,
      waitsForHandler: waits,
      handlerWatched: !late,
      notFound: false,
      longLived,
      neverLongLived: parsed.longLived === false
    })
  }

  /** The plan of requests that matched no route (`app.admission.notFound`), on the plugin's shared quota. */
  notFoundPlan (): Plan {
    const settings = this.settings
    const gate = routeGate('404', undefined, false, this.shared.limiter, leadPolicy(settings.rateLimit), settings.cost, settings.headers, undefined, tierNames(settings.rateLimit))
    this.gates.set(gate.name, gate)
    return this.planner.plan({
      gate,
      tiers: this.tiersOf('404', undefined, this.shared, settings.rateLimit, settings.cost),
      priority: 0,
      enforce: settings.enforce,
      errorResponseBuilder: settings.errorResponseBuilder,
      allowList: settings.allowList,
      onBackendError: settings.onBackendError,
      preHandler: false,
      failures: undefined,
      charge: undefined,
      waitsForHandler: false,
      handlerWatched: true,
      notFound: true,
      longLived: undefined,
      neverLongLived: true
    })
  }

  /**
   * With tiers, a gate per tier besides the route's (named `<route> (tier <name>)` in
   * `stats().routes`, each with its quota, headers and counters).
   */
  private tiersOf (name: string, url: string | undefined, opened: OpenedLimits, limits: Limits | false, cost: number): { tier: (request: FastifyRequest) => string, gates: ReadonlyMap<string, RouteGate> } | undefined {
    if (opened.tiers === undefined || limits === false || !isTiers(limits)) return undefined
    const gates = new Map<string, RouteGate>()
    for (const [tier, limiter] of opened.tiers) {
      const tierGate = routeGate(`${name} (tier ${tier})`, url, false, limiter, leadPolicy(limits.tiers.get(tier)!), cost, this.settings.headers, tier)
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

/** A tiered route's own gate counts what happens before a tier is picked: its policies are the tiers. */
function tierNames (limits: Limits | false): readonly string[] | undefined {
  return limits !== false && isTiers(limits) ? [...limits.tiers.keys()] : undefined
}

/** The plan of a route whose options are not valid: every request is answered with the error (a 500). */
function failingPlan (error: Error): Plan {
  const gate = routeGate('invalid', undefined, false, undefined, undefined, 1, false)
  return { gate, onRequest: (permit) => { permit.fail(error) }, preHandler: undefined, ended: () => {}, failures: undefined, waitsForHandler: false, handlerWatched: false, longLived: undefined }
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
    maxLongLived: false
  }
}

/** The route's hooks of one kind with `hook` after the route's own ones (a nested registration's come after an outer one's). */
function last (hook: Hook, existing: unknown): Hook[] {
  return existing === undefined ? [hook] : Array.isArray(existing) ? [...(existing as Hook[]), hook] : [existing as Hook, hook]
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
