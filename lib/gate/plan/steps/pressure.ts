import type { Contained } from '../../../callbacks/contained.js'
import type { Pressure, ScreenOutcomes } from '../../../pressure/pressure.js'
import type { Outcomes, Step } from '../../outcomes/recorder.js'
import type { Permit } from '../../release/permit.js'

/**
 * Pressure and queueing delay, first of all: while nothing may shed (`active` is 0) the request
 * goes straight on; otherwise pressure decides — shed with its own `Retry-After` and message,
 * handed to `pressureHandler` (whose failures on this route `handler` contains), or on.
 */
export function pressureStep (pressure: Pressure, outcomes: Outcomes, handler: Contained, next: Step): Step {
  const to: ScreenOutcomes<Permit> = {
    shed: (permit, seconds, message) => { outcomes.shed(permit, seconds, message) },
    goOn: next,
    lost: (permit, error) => { permit.lost(error) },
    handler
  }
  return function underPressure (permit) {
    if (pressure.active === 0) next(permit)
    else pressure.screen(permit, to)
  }
}
