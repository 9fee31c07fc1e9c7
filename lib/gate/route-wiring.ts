import type { FastifyBaseLogger, FastifyReply, FastifyRequest, HookHandlerDoneFunction, RouteOptions } from 'fastify'
import type { Pressure } from '../pressure/pressure.js'
import type { Checks } from './check-kinds.js'
import { FailureCount } from './failures.js'
import { isTiers, type Limits, type StackLimits } from './limits.js'
import type { Policy } from '../core/rates/types.js'
import { Groups } from './groups.js'
import { validateRouteOptions, type RouteSettings, type Settings } from './options.js'
import type { Handler, Permits } from './permits.js'
import { leadPolicy, openLimits, type OpenedLimits, type Quotas } from './quotas.js'
import { NORMAL, PRIORITY_NAMES, type Priority } from './priority.js'
import type { StackedQuota } from './stacked-quota.js'
import { routeGate, type RouteGate } from './route-gate.js'
import { gateHooks } from './route-hooks.js'

type Hook = (...args: never[]) => unknown

/**
 * Wires the gate on each route as Fastify adds it (`onRoute`): the route's own hooks, so that a
 * route opted out runs none of them and pays nothing.
 * - `onRequest`: shed, then limit (first among the route's own `onRequest` hooks);
 * - `onResponse`: the core's `release`, once the response is written;
 * - the connection's `close` (see `Permits`): the client went away (also under a pipelined
 *   request whose queued response never finishes): the permit goes back when the handler's work ends;
 * - the handler, wrapped so that the end of its work is known after an abort or a handler timeout.
 * Every route gets a gate of its own (its counters, its semaphore); GET and the HEAD route Fastify
 * adds for it share one, as they share a resource.
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
  private readonly permits: Permits
  private readonly checks: Checks
  private readonly serverTimeout: number | undefined
  private readonly pressure: Pressure | undefined
  /** GET routes by URL, with the handler they were given: their HEAD twin shares their gate. */
  private readonly getRoutes = new Map<string, { handler: unknown, wired: Wired }>()
  private readonly groups: Groups
  private readonly onResponse: Hook

  constructor (settings: Settings, quotas: Quotas, shared: OpenedLimits, permits: Permits, checks: Checks, log: FastifyBaseLogger, serverTimeout?: number, pressure?: Pressure) {
    this.settings = settings
    this.log = log
    this.quotas = quotas
    this.shared = shared
    this.permits = permits
    this.checks = checks
    this.groups = new Groups(quotas)
    this.serverTimeout = serverTimeout
    this.pressure = pressure
    this.onResponse = function admissionOnResponse (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) {
      permits.responded(request, reply)
      done()
    }
  }

  wire (route: RouteOptions): void {
    const methods = Array.isArray(route.method) ? route.method : [route.method]
    const name = this.uniqueName(`${methods.join(',')} ${route.url}`)
    const twin = methods.length === 1 && methods[0] === 'HEAD' ? this.getRoutes.get(route.url) : undefined
    let wired: Wired | false
    if (twin !== undefined && twin.handler === route.handler) {
      wired = twin.wired
    } else {
      wired = this.wiredOf(route, name)
      if (wired !== false && methods.includes('GET')) this.getRoutes.set(route.url, { handler: route.handler, wired })
    }
    if (wired === false) return
    const { gate, hooks } = wired
    if (gate.name === name) this.gates.set(name, gate)
    // With no pressure options the hook is the gate's own, with nothing added.
    const onRequest = this.pressure === undefined ? hooks.onRequest : this.pressure.hook(gate, hooks.onRequest)
    route.onRequest = first(onRequest, route.onRequest) as RouteOptions['onRequest']
    // After the route's own preHandlers (authentication among them), as @fastify/rate-limit does.
    if (hooks.preHandler !== undefined) route.preHandler = last(hooks.preHandler, route.preHandler) as RouteOptions['preHandler']
    const failures = gate.failures
    const permits = this.permits
    // A login route's attempt ends at its response too, should no onSend have run (a hijacked reply).
    const onResponse = failures === undefined
      ? this.onResponse
      : function admissionOnResponse (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
        failures.ended(request)
        permits.responded(request, reply)
        done()
      }
    route.onResponse = first(onResponse, route.onResponse) as RouteOptions['onResponse']
    if (failures !== undefined) {
      // Last among the route's onSend hooks: the status it sees is the one sent.
      const counting = function admissionCountFailure (request: FastifyRequest, reply: FastifyReply, payload: unknown, done: (error: null, payload: unknown) => void): void {
        failures.sending(request, reply)
        done(null, payload)
      }
      route.onSend = last(counting, route.onSend) as RouteOptions['onSend']
    }
    route.handler = this.permits.watch(route.handler as Handler, gate.waitsForHandler)
  }

  private wiredOf (route: RouteOptions, name: string): Wired | false {
    const settings = this.settings
    const own = (route.config as { admission?: unknown } | undefined)?.admission
    const waits = Number((route as { handlerTimeout?: number }).handlerTimeout ?? this.serverTimeout) > 0
    try {
      const parsed = own === undefined ? pluginRoute(settings) : validateRouteOptions(own, name, settings)
      if (parsed === false) return false
      const limits = parsed.rateLimit ?? settings.rateLimit
      const dry = parsed.count === 'failures'
      const path = `config.admission of ${name}.rateLimit`
      const opened: OpenedLimits = parsed.groupId !== undefined
        ? { limiter: this.groups.open(parsed.groupId, limits as Readonly<Policy> | StackLimits, name, `config.admission of ${name}.groupId`), tiers: undefined }
        : parsed.rateLimit === undefined && !dry ? this.shared : openLimits(this.quotas, name, limits, dry, path)
      const priority = PRIORITY_NAMES.indexOf(parsed.priority) as Priority
      const check = this.checks.of(parsed.enforce, parsed.errorResponseBuilder)
      const gate = this.limitedGate(name, parsed.maxInFlight, opened, limits, parsed.cost, waits, priority)
      if (dry) gate.failures = new FailureCount(gate.limiter as StackedQuota, parsed.failed!, parsed.cost, this.log, name)
      const hooks = gateHooks(gate, this.permits, check, {
        preHandler: parsed.hook === 'preHandler',
        allowList: parsed.allowList,
        allowListSkipsShedding: settings.allowListSkipsShedding,
        shadow: !parsed.enforce
      })
      return { gate, hooks }
    } catch (error) {
      this.errors.push(error as Error)
      return false
    }
  }

  /**
   * A route's gate over its opened quotas; with tiers, a gate per tier besides (named
   * `<route> (tier <name>)` in `stats().routes`, each with its quota, headers and counters), which
   * the rate check picks from by `tier(request)`.
   */
  limitedGate (name: string, maxInFlight: number | false, opened: OpenedLimits, limits: Limits | false, cost: number, waits: boolean, priority: Priority = NORMAL): RouteGate {
    const headers = this.settings.headers
    const gate = routeGate(name, maxInFlight, opened.limiter, leadPolicy(limits), cost, headers, waits, priority)
    if (opened.tiers === undefined || limits === false || !isTiers(limits)) return gate
    const gates = new Map<string, RouteGate>()
    for (const [tier, limiter] of opened.tiers) {
      const tierGate = routeGate(`${name} (tier ${tier})`, false, limiter, leadPolicy(limits.tiers.get(tier)!), cost, headers, waits, priority, tier)
      gates.set(tier, tierGate)
      this.gates.set(tierGate.name, tierGate)
    }
    gate.tiers = { tier: limits.tier, gates }
    return gate
  }

  /** Two routes with one method and URL (constraints tell them apart) get `#2`, `#3`… */
  private uniqueName (name: string): string {
    if (!this.gates.has(name)) return name
    let n = 2
    while (this.gates.has(`${name} #${n}`)) n++
    return `${name} #${n}`
  }
}

/** A route's gate and the hooks chosen for it. */
interface Wired { readonly gate: RouteGate, readonly hooks: ReturnType<typeof gateHooks> }

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
    count: 'requests',
    failed: undefined
  }
}

/** The route's hooks of one kind with `hook` after the route's own ones (a nested registration's come after an outer one's). */
function last (hook: Hook, existing: unknown): Hook[] {
  return existing === undefined ? [hook] : Array.isArray(existing) ? [...(existing as Hook[]), hook] : [existing as Hook, hook]
}

/** Marks this plugin's hooks, so that a nested registration's come after an outer one's. */
const kOurs = Symbol('fastify-admission.hook')

/**
 * The route's hooks of one kind with `hook` ahead of the route's own ones, after those of outer
 * registrations of this plugin (their `onRoute` ran first): the outer gate decides first.
 */
function first (hook: Hook, existing: unknown): Hook[] {
  (hook as unknown as Record<symbol, boolean>)[kOurs] = true
  const hooks = existing === undefined ? [] : Array.isArray(existing) ? [...(existing as Hook[])] : [existing as Hook]
  let at = 0
  while (at < hooks.length && (hooks[at] as unknown as Record<symbol, boolean>)[kOurs] === true) at++
  hooks.splice(at, 0, hook)
  return hooks
}
