import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction, RouteOptions } from 'fastify'
import type { Pressure } from '../pressure/pressure.js'
import type { BackendLimiter } from '../rates/backend.js'
import { validateRouteOptions, type Settings } from './options.js'
import type { Handler, Permits } from './permits.js'
import type { Quotas } from './quotas.js'
import type { RateCheck } from './rate-check.js'
import { NORMAL, PRIORITY_NAMES, type Priority } from './priority.js'
import { routeGate, type RouteGate } from './route-gate.js'

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
  private readonly shared: BackendLimiter | undefined
  private readonly permits: Permits
  private readonly check: RateCheck
  private readonly serverTimeout: number | undefined
  private readonly pressure: Pressure | undefined
  /** GET routes by URL, with the handler they were given: their HEAD twin shares their gate. */
  private readonly getRoutes = new Map<string, { handler: unknown, gate: RouteGate }>()
  private readonly onResponse: Hook

  constructor (settings: Settings, quotas: Quotas, shared: BackendLimiter | undefined, permits: Permits, check: RateCheck, serverTimeout?: number, pressure?: Pressure) {
    this.settings = settings
    this.quotas = quotas
    this.shared = shared
    this.permits = permits
    this.check = check
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
    let gate: RouteGate | false
    if (twin !== undefined && twin.handler === route.handler) {
      gate = twin.gate
    } else {
      gate = this.gateOf(route, name)
      if (gate !== false && methods.includes('GET')) this.getRoutes.set(route.url, { handler: route.handler, gate })
    }
    if (gate === false) return
    if (gate.name === name) this.gates.set(name, gate)
    const permits = this.permits
    const check = this.check
    const admitGate = gate
    // The hook is chosen here: a `normal` route's path is the one it was before priorities, and
    // with no pressure options the hook is the gate's own, with nothing added.
    const gateHook = gate.priority === NORMAL
      ? function admissionOnRequest (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
        if (!permits.take(request, reply, admitGate)) check.shed(request, reply, admitGate)
        else if (admitGate.limiter === undefined) check.admit(request, admitGate, done)
        else check.run(request, reply, admitGate, done)
      }
      : function admissionOnRequest (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
        if (!permits.takePrioritized(request, reply, admitGate)) check.shed(request, reply, admitGate)
        else if (admitGate.limiter === undefined) check.admit(request, admitGate, done)
        else check.run(request, reply, admitGate, done)
      }
    const onRequest = this.pressure === undefined ? gateHook : this.pressure.hook(gate, gateHook)
    route.onRequest = first(onRequest, route.onRequest) as RouteOptions['onRequest']
    route.onResponse = first(this.onResponse, route.onResponse) as RouteOptions['onResponse']
    route.handler = this.permits.watch(route.handler as Handler, gate.waitsForHandler)
  }

  private gateOf (route: RouteOptions, name: string): RouteGate | false {
    const settings = this.settings
    const own = (route.config as { admission?: unknown } | undefined)?.admission
    const waits = Number((route as { handlerTimeout?: number }).handlerTimeout ?? this.serverTimeout) > 0
    try {
      const parsed = own === undefined ? undefined : validateRouteOptions(own, name, settings)
      if (parsed === false) return false
      if (parsed === undefined) return routeGate(name, false, this.shared, settings.rateLimit, settings.cost, settings.headers, waits)
      const priority = PRIORITY_NAMES.indexOf(parsed.priority) as Priority
      if (parsed.rateLimit === undefined) return routeGate(name, parsed.maxInFlight, this.shared, settings.rateLimit, parsed.cost, settings.headers, waits, priority)
      return routeGate(name, parsed.maxInFlight, this.quotas.open(name, parsed.rateLimit), parsed.rateLimit, parsed.cost, settings.headers, waits, priority)
    } catch (error) {
      this.errors.push(error as Error)
      return false
    }
  }

  /** Two routes with one method and URL (constraints tell them apart) get `#2`, `#3`… */
  private uniqueName (name: string): string {
    if (!this.gates.has(name)) return name
    let n = 2
    while (this.gates.has(`${name} #${n}`)) n++
    return `${name} #${n}`
  }
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
