import type { RouteGate } from '../route-gate.js'

/** How often the held permits are looked at, at most and at least, ms. */
const SWEEP_MIN_MS = 10
const SWEEP_MAX_MS = 10_000

/** How long the route's oldest permit has been held, ms (0 with none): Fastify's own clock of the request. */
export function oldestPermitMs (gate: RouteGate): number {
  const oldest = gate.oldest
  return oldest === null ? 0 : Math.floor(oldest.reply.elapsedTime)
}

/**
 * Permits held longer than `permitWarningMs` are logged once each, at `warn`, with their route:
 * a request that works that long, or a long-lived reply the gate does not recognise, holding an
 * in-flight slot. One timer per registration (unref'd, from the registration to `close`) walks each route's
 * permits from the oldest while they are over the threshold; nothing runs per request.
 */
export class HeldPermits {
  private readonly gates: () => Iterable<RouteGate>
  private readonly thresholdMs: number
  private timer: NodeJS.Timeout | undefined = undefined

  constructor (gates: () => Iterable<RouteGate>, thresholdMs: number) {
    this.gates = gates
    this.thresholdMs = thresholdMs
  }

  start (): void {
    const every = Math.min(SWEEP_MAX_MS, Math.max(SWEEP_MIN_MS, Math.floor(this.thresholdMs / 2)))
    this.timer = setInterval(() => { this.sweep() }, every)
    this.timer.unref()
  }

  stop (): void {
    clearInterval(this.timer)
  }

  private sweep (): void {
    const threshold = this.thresholdMs
    for (const gate of this.gates()) {
      for (let permit = gate.oldest; permit !== null; permit = permit.newer) {
        const held = permit.reply.elapsedTime
        if (held <= threshold) break
        if (permit.warned) continue
        permit.warned = true
        permit.request.log.warn({ route: gate.name, heldMs: Math.floor(held) },
          `fastify-admission: a request to ${gate.name} has held its in-flight permit for ${Math.floor(held)} ms (permitWarningMs: ${threshold}): a handler still working, or a long-lived reply the gate does not recognise — mark such a route config.admission.longLived: true`)
      }
    }
  }
}
