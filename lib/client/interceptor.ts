import type { Dispatcher } from 'undici'
import { settingsOf, type AdmissionRetryOptions, type RetryEvent } from './options.js'
import { RetriedRequest, type Shared } from './retried-request.js'
import { newStats, Origins, type AdmissionRetryStats } from './state.js'

/** An undici interceptor (for `dispatcher.compose()`), with what it did so far. */
export interface AdmissionRetryInterceptor {
  (dispatch: Dispatcher.Dispatch): Dispatcher.Dispatch
  /** A copy of the counters, since the interceptor was made. */
  stats: () => AdmissionRetryStats
}

/**
 * An undici interceptor that retries the way a server that sheds and rate-limits asks: it waits
 * what `Retry-After` says (never less), pauses a whole origin on a 503 that says how long, holds
 * an origin whose `RateLimit` fields say its quota is spent until the reset, backs off with full
 * jitter where the server names no time, keeps retries within a budget per origin, and numbers
 * every attempt in `Retry-Attempt`. `new Agent().compose(admissionRetry())` serves `fetch`,
 * `request`, `Agent` and `Pool` alike. The state (holds, budgets, counters) belongs to the
 * interceptor: compose one into every dispatcher that should share it.
 */
export function admissionRetry (options?: AdmissionRetryOptions): AdmissionRetryInterceptor {
  const settings = settingsOf(options)
  const stats = newStats()
  const origins = new Origins(settings.budget, settings.now)
  let warned = false
  const tell = (event: RetryEvent): void => {
    if (settings.onRetry === undefined) return
    try {
      settings.onRetry(event)
    } catch (error) {
      // The application's callback failed: the retry goes on; said once, counted always.
      stats.callbackErrors++
      if (!warned) {
        warned = true
        process.emitWarning(`fastify-admission/client: onRetry threw (${String(error)}); retries go on (warned once, counted in stats().callbackErrors)`, { code: 'ADMISSION_CLIENT_CALLBACK' })
      }
    }
  }
  const shared: Shared = { settings, stats, tell }
  const interceptor = (dispatch: Dispatcher.Dispatch): Dispatcher.Dispatch => {
    return function admissionRetryDispatch (opts, handler) {
      const key = opts.origin === undefined ? '' : String(opts.origin instanceof URL ? opts.origin.origin : opts.origin)
      return new RetriedRequest(shared, origins.get(key), key, opts, handler, dispatch).start()
    }
  }
  return Object.assign(interceptor, { stats: (): AdmissionRetryStats => ({ ...stats }) })
}
