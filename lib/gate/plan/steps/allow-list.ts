import type { Contained } from '../../../callbacks/contained.js'
import type { AllowMatcher } from '../../options/allow-list.js'
import type { Outcomes, Step } from '../../outcomes/recorder.js'
import type { Take } from '../../release/slots.js'

/** The allow list: a client on it goes on, taking nothing from its quota and getting no headers. */
export function allowListStep (allows: AllowMatcher, contained: Contained, outcomes: Outcomes, next: Step): Step {
  return function allowList (permit) {
    const on = onList(allows, contained, permit)
    if (on === true) outcomes.allowed(permit)
    else if (on === false) next(permit)
  }
}

/**
 * The allow list before shedding (`allowListSkipsShedding`): a client on it goes on even when the
 * gate is full (holding a slot when one is free, so that the gauge counts it); any other goes on
 * to the in-flight gate and its quota, with its key already made.
 */
export function allowFirstStep (allows: AllowMatcher, contained: Contained, take: Take, outcomes: Outcomes, next: Step): Step {
  return function allowFirst (permit) {
    const on = onList(allows, contained, permit)
    if (on === true) {
      take(permit)
      outcomes.allowed(permit)
    } else if (on === false) {
      next(permit)
    }
  }
}

/**
 * Whether the client is on the list; undefined when the application's function threw (a 500 of its
 * error, the permit back, logged once for the route): whether the client may skip its quota is not
 * known, and neither a yes nor a no would be the application's answer.
 */
function onList (allows: AllowMatcher, contained: Contained, permit: Parameters<Step>[0]): boolean | undefined {
  let on: boolean
  try {
    on = allows(permit.request, permit.key!)
  } catch (error) {
    contained.failed(error)
    permit.fail(error, 'allowList')
    return undefined
  }
  contained.worked()
  return on
}
