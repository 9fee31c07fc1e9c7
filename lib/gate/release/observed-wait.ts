import { observeDuration, semaphoreWaitSeconds } from '../../core/semaphore-wait.js'
import type { RouteGate } from '../route-gate.js'
import { oldestPermitMs } from './held-permits.js'
import type { EndListener } from './permit.js'

/**
 * A route semaphore's `retryAfter: 'observed'`: a full route advertises when its oldest permit is
 * expected to end (the core's `semaphoreWaitSeconds`), from the route's observed duration — each
 * response written is a sample (a refusal, an abort or a timeout says nothing of how long the work
 * takes) — and the age of its oldest permit, on Fastify's clock of the request.
 */
export class ObservedWait {
  private observedMs = 0

  readonly ended: EndListener = (permit, how) => {
    if (how === 'responded') this.observedMs = observeDuration(this.observedMs, permit.reply.elapsedTime)
  }

  /** `Retry-After` of the full route, s. */
  seconds (gate: RouteGate): number {
    return semaphoreWaitSeconds(oldestPermitMs(gate), this.observedMs)
  }
}
