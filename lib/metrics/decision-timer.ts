import { performance } from 'node:perf_hooks'
import type { BackendLimiter, RatesBackend, StackLimiter } from '../rates/backend.js'

/**
 * Times the gate's backend round trips, for the decision latency histogram. Chosen at
 * registration: without `metrics` the gate's quotas are the backend's own limiters and no clock
 * is read. With it, each limiter that decides by promise (Redis) is wrapped, reading the
 * monotonic clock before the call and when it settles (a failure too: a timeout is the latency
 * an operator needs to see). A limiter with synchronous decisions (memory) is left as it is: the
 * gate never awaits it, its decision is a few hundred nanoseconds of this process's CPU (two
 * clock reads and an observation would cost more than the decision), and it has no round trip to
 * watch — the event loop's own lag is what measures it.
 */
export class DecisionTimer {
  /**
   * Where a duration in seconds goes: the histogram, once prom-client is loaded. It is called in
   * the decision's continuation, so it must not throw (`AdmissionMetrics` contains it): a metric
   * never changes a decision.
   */
  observe: (seconds: number) => void = () => {}
  private readonly now: () => number

  /** `now`: milliseconds of a monotonic clock (tests pass a fake one). */
  constructor (now: () => number = () => performance.now()) {
    this.now = now
  }

  /** The backend as the gate's quotas see it: its limiters timed when they decide by promise. */
  over (backend: RatesBackend): RatesBackend {
    // Everything else (`kind`, `identities`, `stop`) is the backend's own, through the prototype.
    const timed = Object.create(backend) as RatesBackend & { limiter: RatesBackend['limiter'], stack: RatesBackend['stack'] }
    timed.limiter = (address, policy) => this.timed(backend.limiter(address, policy))
    if (typeof backend.stack === 'function') timed.stack = (address, policies) => this.timedStack(backend.stack!(address, policies))
    return timed
  }

  /** A stack's decisions and checks, timed as a limiter's are (a synchronous stack is not). */
  private timedStack (stack: StackLimiter): StackLimiter {
    if (stack.synchronous !== undefined) return stack
    return {
      policies: stack.policies,
      consume: (identity, cost) => this.time(() => stack.consume(identity, cost)),
      check: (identity, cost) => this.time(() => stack.check(identity, cost)),
      state: stack.state.bind(stack),
      delete: stack.delete.bind(stack),
      // A charge is no decision: not timed, but kept (a route's `charge` needs it).
      ...(stack.charge === undefined ? {} : { charge: stack.charge.bind(stack) })
    }
  }

  private time<T> (call: () => Promise<T>): Promise<T> {
    const started = this.now()
    const done = (): void => { this.observe((this.now() - started) / 1000) }
    return Promise.resolve(call()).then(
      (value) => { done(); return value },
      (error: unknown) => { done(); throw error }
    )
  }

  private timed (limiter: BackendLimiter): BackendLimiter {
    // Junk is passed on for the quotas' own check to refuse; a synchronous limiter is not timed.
    if (typeof limiter !== 'object' || limiter === null || typeof limiter.consume !== 'function' || typeof limiter.state !== 'function' ||
      typeof limiter.delete !== 'function' || limiter.synchronous !== undefined) return limiter
    const timer = this
    return {
      policy: limiter.policy,
      consume (identity, cost) {
        const started = timer.now()
        // A synchronous throw reaches the gate as it would without the timer.
        const pending = limiter.consume(identity, cost)
        const done = (): void => { timer.observe((timer.now() - started) / 1000) }
        return Promise.resolve(pending).then(
          (decision) => { done(); return decision },
          (error: unknown) => { done(); throw error }
        )
      },
      state: limiter.state.bind(limiter),
      delete: limiter.delete.bind(limiter),
      ...(limiter.charge === undefined ? {} : { charge: limiter.charge.bind(limiter) }),
      ...(limiter.now === undefined ? {} : { now: limiter.now.bind(limiter) })
    }
  }
}
