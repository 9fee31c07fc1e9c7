import type { Outcomes, Step } from '../../outcomes/recorder.js'
import type { Take } from '../../release/slots.js'

/**
 * The in-flight permit: the global slot by the route's priority (`take`), then the route's own.
 * A full gate sheds the request — the first refusal, before any quota is touched.
 */
export function inFlightStep (take: Take, outcomes: Outcomes, next: Step): Step {
  return function inFlight (permit) {
    if (take(permit)) next(permit)
    else outcomes.full(permit, next)
  }
}

/**
 * Requests that hold no slot (those that matched no route: a 404 does no work to protect) are
 * refused while the global gate is full.
 */
export function fullGateStep (isFull: () => boolean, outcomes: Outcomes, next: Step): Step {
  return function whileFull (permit) {
    if (isFull()) outcomes.full(permit, next)
    else next(permit)
  }
}
