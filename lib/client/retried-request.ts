import type { Duplex } from 'node:stream'
import type { Dispatcher } from 'undici'
import { withAttempt } from './attempt-header.js'
import { recordRequest, withdrawRetry } from './budget.js'
import type { RetryEvent, Settings } from './options.js'
import { originHolds, retryTime } from './plan.js'
import type { AdmissionRetryStats, OriginState } from './state.js'

type Controller = Dispatcher.DispatchController
type Handler = Dispatcher.DispatchHandler
type Headers = Parameters<NonNullable<Handler['onResponseStart']>>[2]

/** What one interceptor shares between its requests. */
export interface Shared {
  readonly settings: Settings
  readonly stats: AdmissionRetryStats
  /** Calls `onRetry`, containing a throw. */
  readonly tell: (event: RetryEvent) => void
}

/**
 * The controller the application's handler holds for the whole request, whichever attempt is on
 * the wire: it forwards to the current attempt's controller, keeps a pause across attempts, and an
 * abort while the request waits between attempts ends the wait.
 */
class RequestController implements Controller {
  target: Controller | null = null
  private pausedHere = false
  private abortedWith: Error | null = null
  private readonly onAbort: (reason: Error) => void

  constructor (onAbort: (reason: Error) => void) {
    this.onAbort = onAbort
  }

  get aborted (): boolean { return this.abortedWith !== null || (this.target?.aborted ?? false) }
  get paused (): boolean { return this.pausedHere }
  get reason (): Error | null { return this.abortedWith ?? this.target?.reason ?? null }

  abort (reason: Error): void {
    if (this.abortedWith !== null) return
    this.abortedWith = reason
    if (this.target !== null) this.target.abort(reason)
    else this.onAbort(reason)
  }

  pause (): void {
    this.pausedHere = true
    this.target?.pause()
  }

  resume (): void {
    this.pausedHere = false
    this.target?.resume()
  }
}

/**
 * One request through the interceptor, across its attempts. Every attempt waits for its origin's
 * hold; a refusal that may be retried (its status, the method, a body that can be sent again, the
 * retries left, the origin's budget) is read to its end and not shown to the application, which
 * sees one request: the first attempt's start, and the last attempt's response.
 */
export class RetriedRequest implements Handler {
  private readonly shared: Shared
  private readonly origin: OriginState
  private readonly key: string
  private readonly opts: Dispatcher.DispatchOptions
  private readonly downstream: Handler
  private readonly dispatch: Dispatcher.Dispatch
  /** Whether a refusal may be retried at all: the method is one to retry and the body can be sent again. */
  private readonly replayable: boolean
  private readonly controller: RequestController
  private attempt = 0
  private started = false
  /** Set while a refused attempt is read to its end, before its retry: when the retry may go. */
  private retryAt: number | undefined
  private timer: ReturnType<typeof setTimeout> | undefined
  private waitingSince: number | undefined

  constructor (shared: Shared, origin: OriginState, key: string, opts: Dispatcher.DispatchOptions, downstream: Handler, dispatch: Dispatcher.Dispatch) {
    this.shared = shared
    this.origin = origin
    this.key = key
    this.opts = opts
    this.downstream = downstream
    this.dispatch = dispatch
    this.replayable = shared.settings.methods.has(String(opts.method).toUpperCase()) && replayableBody(opts.body)
    this.controller = new RequestController((reason) => { this.cancel(reason) })
  }

  /** The first attempt: sent now, or once the origin's hold is over. */
  start (): boolean {
    if (this.origin.holdUntil <= this.shared.settings.now()) return this.send()
    this.waitUntil(0)
    return true
  }

  /** Waits until `at` and the origin's hold (which may grow meanwhile) are both past, then sends. */
  private waitUntil (at: number): void {
    const now = this.shared.settings.now()
    const until = Math.max(at, this.origin.holdUntil)
    // A timer may fire a little early by this clock: the time is checked again when it does.
    if (until > now) {
      this.waitingSince ??= now
      this.timer = setTimeout(() => { this.waitUntil(at) }, until - now)
      return
    }
    this.timer = undefined
    if (this.waitingSince !== undefined) {
      this.shared.stats.waits++
      this.shared.stats.waitedMs += now - this.waitingSince
      this.waitingSince = undefined
    }
    try {
      this.send()
    } catch (error) {
      this.fail(error as Error)
    }
  }

  private send (): boolean {
    const { stats, settings } = this.shared
    this.attempt++
    stats.attempts++
    if (this.attempt === 1) {
      stats.requests++
      this.origin.budget = recordRequest(this.origin.budget, settings.budget, settings.now())
    } else {
      stats.retries++
    }
    this.retryAt = undefined
    return this.dispatch({ ...this.opts, headers: withAttempt(this.opts.headers, this.attempt) }, this)
  }

  /** The application aborted while the request waited: no attempt is sent. */
  private cancel (reason: Error): void {
    clearTimeout(this.timer)
    this.timer = undefined
    this.fail(reason)
  }

  private fail (error: Error): void {
    this.downstream.onResponseError?.(this.controller, error)
  }

  onRequestStart (controller: Controller, context: unknown): void {
    this.controller.target = controller
    if (this.started) return
    this.started = true
    this.downstream.onRequestStart?.(this.controller, context)
  }

  onRequestUpgrade (_controller: Controller, statusCode: number, headers: Headers, socket: Duplex): void {
    this.downstream.onRequestUpgrade?.(this.controller, statusCode, headers, socket)
  }

  onResponseStart (_controller: Controller, statusCode: number, headers: Headers, statusMessage?: string): void {
    const { settings, stats } = this.shared
    const receivedAt = settings.now()
    const holds = originHolds(statusCode, headers, receivedAt, settings.maxWaitMs)
    if (holds.pauseUntil !== undefined) {
      stats.pauses++
      this.holdOrigin(holds.pauseUntil)
    }
    if (holds.quotaUntil !== undefined) {
      stats.paced++
      this.holdOrigin(holds.quotaUntil)
    }
    if (settings.statusCodes.has(statusCode) && this.replayable && this.attempt <= settings.maxRetries) {
      this.retryAt = this.planRetry(statusCode, headers, receivedAt)
      if (this.retryAt !== undefined) return
    }
    this.downstream.onResponseStart?.(this.controller, statusCode, headers, statusMessage)
  }

  private holdOrigin (until: number): void {
    if (until > this.origin.holdUntil) this.origin.holdUntil = until
  }

  /** When the refused attempt is retried, or undefined when it is not (the server asks too long a wait, or the budget is spent). */
  private planRetry (statusCode: number, headers: Headers, receivedAt: number): number | undefined {
    const { settings, stats } = this.shared
    const time = retryTime({
      headers, receivedAt, retry: this.attempt, holdUntil: this.origin.holdUntil,
      baseDelayMs: settings.baseDelayMs, maxDelayMs: settings.maxDelayMs, maxWaitMs: settings.maxWaitMs, random: settings.random()
    })
    if (time === undefined) return undefined
    const withdrawal = withdrawRetry(this.origin.budget, settings.budget, receivedAt)
    this.origin.budget = withdrawal.state
    if (!withdrawal.ok) {
      stats.retriesDenied++
      return undefined
    }
    this.shared.tell({ origin: this.key, method: this.opts.method, path: this.opts.path, statusCode, attempt: this.attempt + 1, waitMs: time.at - receivedAt, advertised: time.advertised })
    return time.at
  }

  onResponseData (_controller: Controller, chunk: Buffer): void {
    if (this.retryAt === undefined) this.downstream.onResponseData?.(this.controller, chunk)
  }

  onResponseEnd (_controller: Controller, trailers: Headers): void {
    if (this.retryAt === undefined) {
      this.downstream.onResponseEnd?.(this.controller, trailers)
      return
    }
    this.retryLater(this.retryAt)
  }

  onResponseError (_controller: Controller, error: Error): void {
    // A refusal whose body failed to arrive is still a refusal: its retry goes on, unless the application aborted.
    if (this.retryAt !== undefined && !this.controller.aborted) {
      this.retryLater(this.retryAt)
      return
    }
    this.fail(error)
  }

  private retryLater (at: number): void {
    this.controller.target = null
    this.waitUntil(at)
  }
}

/** A body that can be sent again as it is: none, a string or bytes. A stream or an async iterable is read once. */
export function replayableBody (body: unknown): boolean {
  return body === undefined || body === null || typeof body === 'string' || ArrayBuffer.isView(body)
}
