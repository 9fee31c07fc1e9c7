import type { FastifyBaseLogger } from 'fastify'
import { types } from 'node:util'
import { show } from '../validation/show.js'

/**
 * The error boundary of one application callback in one place (a route, or the pressure
 * sampler). A callback that throws, or returns a promise that rejects, is a bug of the
 * application: it must neither end the process (a throw in a promise's continuation is an
 * unhandled rejection) nor change what the gate answers. Its failure is logged at `error`, naming
 * the callback and the route, once until the callback next works there; the caller then goes on
 * as the callback's documentation says — for most, as if it had not been given.
 */
export class Contained {
  readonly callback: string
  /** The route (`GET /x`, `404`), or undefined for a callback of the registration (the pressure sampler's). */
  readonly route: string | undefined
  private readonly log: FastifyBaseLogger
  /** What the caller does instead, as the log line says it. */
  private readonly instead: string
  /** Whether a success logs the next failure again (false: once for the place, for good). */
  private readonly again: boolean
  private failing = false
  /** A returned promise's outcomes, made once. */
  private readonly settled = (): void => { this.failing = false }
  private readonly rejected = (error: unknown): void => { this.failed(error) }

  constructor (log: FastifyBaseLogger, callback: string, route: string | undefined, instead: string, again = true) {
    this.log = log
    this.callback = callback
    this.route = route
    this.instead = instead
    this.again = again
  }

  /** The callback threw (or rejected) with `error`: logged, unless it failed already since it last worked. */
  failed (error: unknown): void {
    if (this.failing) return
    this.failing = true
    // A thrown value that is no Error is shown short: it may be anything, the request's bytes included.
    const err = error instanceof Error || types.isNativeError(error) ? error : show(error)
    const where = this.route === undefined ? '' : ` for ${this.route}`
    this.log.error({ callback: this.callback, ...(this.route === undefined ? {} : { route: this.route }), err },
      `fastify-admission: ${this.callback} failed${where}; ${this.instead} (logged once${this.again ? ' until it works again' : ''})`)
  }

  /** The callback returned normally. */
  worked (): void {
    this.failing = false
  }

  /**
   * Calls a callback whose answer the gate does not use (`onLimit`, `onShed`, a subscriber): a
   * throw, or the rejection of a promise it returns, is `failed`; the caller goes on either way.
   */
  notify<A extends unknown[]> (fn: (...args: A) => unknown, ...args: A): void {
    let result: unknown
    try {
      result = fn(...args)
    } catch (error) {
      this.failed(error)
      return
    }
    if (isThenable(result)) Promise.resolve(result).then(this.settled, this.rejected)
    else this.failing = false
  }

  /** What a callback returned, when it is a promise: its rejection is `failed` (its success says nothing of the others'). */
  watch (result: unknown): void {
    if (isThenable(result)) Promise.resolve(result).then(undefined, this.rejected)
  }
}

/**
 * A promise a callback returned where an answer was due now (a key, a tier, an allow list's answer,
 * a refusal's body): the gate refuses it as an answer, and its rejection, if it comes, is handled
 * here — it must not end the process as an unhandled rejection.
 */
export function settleUnused (value: PromiseLike<unknown>): void {
  Promise.resolve(value).then(undefined, ignore)
}

function ignore (): void {}

/** Whether a callback's answer is a promise (or another thenable), which the gate must not leave unhandled. */
export function isThenable (value: unknown): value is PromiseLike<unknown> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { then?: unknown }).then === 'function'
}
