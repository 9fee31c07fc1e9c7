import type { FastifyInstance, RouteOptions } from 'fastify'
import { AdmissionScopeError } from './errors.js'
import type { ContextGate } from './on-request.js'

/**
 * What the application's registrations of this plugin know of its routes, kept on its root
 * context from the first registration on:
 *
 * - every route declared since (the root's `onRoute`, and each registration's own for contexts
 *   made before the root's hook existed), with the context that declared it — a registration
 *   loaded later wires the routes already declared inside it from here, as if it had seen them;
 * - how many (by method, as the router counts them): fewer than the router holds means routes
 *   were declared before any registration watched, and a registration cannot tell where;
 * - each registration's request field for its permit, which a gated route's handler tells when it
 *   returns (`watchHandler`);
 * - the routes that asked for a gate (`config.admission` is an object) and those some
 *   registration gates, and the registrations' errors in route options: at `ready()`, one left
 *   over is an error, never a silent pass. The check is an `onReady` hook added only once there is
 *   something to check, so that an application with no such route has no hook of it.
 */
export interface RouteRecord {
  readonly seen: Map<RouteOptions, FastifyInstance>
  /** Methods of the routes seen (a route with two methods is two of the router's). */
  methods: number
  /** Each registration's request field for its permit. */
  readonly fields: symbol[]
  readonly asking: Map<RouteOptions, string>
  readonly gated: WeakSet<RouteOptions>
  /** Registrations whose hooks are their context's (they found routes no registration saw). */
  readonly contextGates: ContextGate[]
  /** Errors in route options found when a route was planned, reported at `ready()`. */
  readonly errors: Error[]
  /** The root context, where the `ready()` check goes. */
  readonly root: FastifyInstance
  /** The `ready()` check is set. */
  checking: boolean
}

const kRecord = Symbol.for('fastify-admission.routes')

/** The application's record, made (and its `onRoute` hook set on the root context) by the first registration. */
export function routeRecord (fastify: FastifyInstance): RouteRecord {
  const root = rootOf(fastify)
  const holder = root as unknown as Record<symbol, RouteRecord | undefined>
  let record = holder[kRecord]
  if (record === undefined) {
    const made: RouteRecord = { seen: new Map(), methods: 0, fields: [], asking: new Map(), gated: new WeakSet(), contextGates: [], errors: [], root, checking: false }
    record = made
    holder[kRecord] = made
    root.addHook('onRoute', function recordRoute (this: FastifyInstance, route: RouteOptions) { see(made, this, route) })
  }
  return record
}

/** Records a declared route (once). */
export function see (record: RouteRecord, context: FastifyInstance, route: RouteOptions): void {
  if (record.seen.has(route)) return
  record.seen.set(route, context)
  record.methods += Array.isArray(route.method) ? route.method.length : 1
  const own = (route.config as { admission?: unknown } | undefined)?.admission
  if (own !== undefined && own !== false) {
    record.asking.set(route, `${Array.isArray(route.method) ? route.method.join(',') : route.method} ${route.url}`)
    checkAtReady(record)
  }
}

/** A route option found wrong when its route was planned: `ready()` fails with the first. */
export function reportAtReady (record: RouteRecord, error: Error): void {
  record.errors.push(error)
  checkAtReady(record)
}

function checkAtReady (record: RouteRecord): void {
  if (record.checking) return
  record.checking = true
  record.root.addHook('onReady', function admissionRouteCheck (ready) { ready(record.errors[0] ?? ungated(record)) })
}

/** Whether routes are in the router that no registration saw declared (before the first one). */
export function unseenRoutes (fastify: FastifyInstance, record: RouteRecord): boolean {
  const printed = fastify.printRoutes({ commonPrefix: false })
  let methods = 0
  for (const list of printed.matchAll(/\(([A-Z]+(?:, [A-Z]+)*)\)/g)) methods += list[1]!.split(', ').length
  return methods !== record.methods
}

/** The registrations with context hooks that enclose `context` and sit above `depth`, outermost first; made once per context. */
export function outerGates (record: RouteRecord, depth: number): (context: FastifyInstance) => readonly ContextGate[] {
  const known = new WeakMap<FastifyInstance, readonly ContextGate[]>()
  return (context) => {
    let outer = known.get(context)
    if (outer === undefined) {
      outer = record.contextGates.filter((gate) => gate.depth < depth && encloses(gate.context, context)).sort((a, b) => a.depth - b.depth)
      known.set(context, outer)
    }
    return outer
  }
}

/** Whether `context` is `fastify` or one of the contexts made inside it. */
export function encloses (fastify: FastifyInstance, context: FastifyInstance): boolean {
  for (let at: object | null = context; at !== null; at = Object.getPrototypeOf(at) as object | null) if (at === fastify) return true
  return false
}

function rootOf (fastify: FastifyInstance): FastifyInstance {
  let root = fastify as object
  for (;;) {
    const parent = Object.getPrototypeOf(root) as object | null
    // The root instance is a plain object; every context below it is created from its parent.
    if (parent === null || parent === Object.prototype) return root as FastifyInstance
    root = parent
  }
}

/** The routes that asked for a gate and got none; undefined when every one got it. */
export function ungated (record: RouteRecord): AdmissionScopeError | undefined {
  const left: string[] = []
  for (const [route, name] of record.asking) if (!record.gated.has(route)) left.push(name)
  return left.length === 0 ? undefined : new AdmissionScopeError(left)
}
