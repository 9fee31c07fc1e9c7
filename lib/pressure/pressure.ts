import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { isThenable, type Contained } from '../callbacks/contained.js'
import { DelayProbe } from './delay-probe.js'
import type { PressureSettings, QueueDelaySettings } from './options.js'
import { Sampler } from './sampler.js'
import { SIGNALS, type PressureReadings, type Signal } from './signals.js'

/** Why requests were shed by pressure: by signal, and by the queueing-delay controller. */
export type ShedReason = Signal | 'queueDelay'

/** Counters of the pressure part, in `stats().pressure`. */
export interface PressureCounts {
  /** Requests answered 503 by each reason (also counted in `shed`). */
  readonly shed: Readonly<Record<ShedReason, number>>
  /** Requests handed to `pressureHandler` instead of a 503. */
  readonly handled: number
}

/** What `app.admission.pressure()` and the status route say. */
export interface PressureStatus {
  /** A signal is over its limit: every gated request is answered 503 (or by `pressureHandler`). */
  readonly underPressure: boolean
  /** The first signal over its limit, in under-pressure's order: its value and its limit. */
  readonly reason?: { readonly signal: Signal, readonly value: number | undefined, readonly limit: number | undefined }
  /** The latest readings (with `pressure`), and the limits they are held to. */
  readonly readings?: PressureReadings
  readonly limits?: Readonly<Partial<Record<Signal, number>>>
  /**
   * The queueing-delay shedder (with `queueDelay`): whether the CoDel controller sees a standing
   * queue (the loop's lateness above `targetMs` for an interval), the latest lateness, and the cut:
   * requests that waited longer in their turn of the loop are shed; and whether new connections
   * wait in a standing accept queue (their first request is shed).
   */
  readonly queueDelay?: { readonly standing: boolean, readonly delayMs: number, readonly cutMs: number, readonly targetMs: number, readonly intervalMs: number, readonly acceptQueueStanding: boolean }
  readonly counts: PressureCounts
}

/** What pressure screens: a request with its reply (the gate's permit, for one). */
export interface Screened { readonly request: FastifyRequest, readonly reply: FastifyReply }

/** Where a screened request goes: shed (with `Retry-After`, a message and why) or on; and the boundary of `pressureHandler` where it is screened. */
export interface ScreenOutcomes<T extends Screened> {
  shed (item: T, retrySeconds: number, message: string, why: ShedReason): void
  goOn (item: T): void
  /** Something threw in the continuation of the handler's promise (where no hook runner catches it). */
  lost (item: T, error: unknown): void
  /** `pressureHandler`'s failures on this route. */
  readonly handler: Contained
}

const UNDER_PRESSURE = 'Server is under pressure'
const OVERLOADED = 'Server is overloaded'

function zeroCounts (): Record<ShedReason, number> {
  return { eventLoopDelay: 0, heapUsedBytes: 0, rssBytes: 0, healthCheck: 0, eventLoopUtilization: 0, queueDelay: 0 }
}

/**
 * The pressure part of one registration: the sampler of the signals and the queueing-delay
 * probe, which the gate's first step asks. Per request it reads one number (`active`, non-zero
 * only while a signal is over or the controller sheds) and, only then, decides (`screen`); the
 * samplers update it from their timers.
 */
export class Pressure {
  /** Non-zero while anything may shed (always with `queueDelay`): the one field a request reads when nothing does. */
  active = 0
  readonly sampler: Sampler | undefined
  readonly probe: DelayProbe | undefined
  private readonly settings: PressureSettings | undefined
  private readonly queue: QueueDelaySettings | undefined
  private readonly shedBy = zeroCounts()
  private handled = 0
  private readonly queueRetry: number

  constructor (fastify: FastifyInstance, settings: PressureSettings | undefined, queue: QueueDelaySettings | undefined) {
    this.settings = settings
    this.queue = queue
    const changed = (): void => { this.refresh() }
    this.sampler = settings === undefined ? undefined : new Sampler(settings, fastify, changed)
    this.probe = queue === undefined ? undefined : new DelayProbe(queue)
    // A standing queue lasts an interval at least: never less than a second, the header's unit.
    this.queueRetry = queue === undefined ? 1 : Math.max(1, Math.ceil(queue.codel.intervalMs / 1000))
    this.refresh()
    const probe = this.probe
    if (probe !== undefined) {
      fastify.server.on('connection', probe.accepted)
      fastify.server.on('secureConnection', probe.secured)
    }
    fastify.addHook('onReady', async () => {
      await this.sampler?.start()
      this.probe?.start()
    })
    fastify.addHook('onClose', (_instance, done) => {
      this.sampler?.stop()
      this.probe?.stop()
      if (probe !== undefined) {
        fastify.server.off('connection', probe.accepted)
        fastify.server.off('secureConnection', probe.secured)
      }
      done()
    })
  }

  private refresh (): void {
    this.active = (this.sampler?.over === undefined ? 0 : 1) | (this.probe === undefined ? 0 : 2)
  }

  /** Something may shed (`active` is non-zero): a signal over its limit sheds all; the queue-delay shedder, the requests that waited too long. */
  screen<T extends Screened> (item: T, to: ScreenOutcomes<T>): void {
    const over = this.sampler?.over
    if (over !== undefined) {
      this.underPressure(item, to, over)
      return
    }
    if (this.probe!.sheds(item.request.raw.socket)) {
      this.shedBy.queueDelay++
      to.shed(item, this.queueRetry, OVERLOADED, 'queueDelay')
    } else {
      to.goOn(item)
    }
  }

  private underPressure<T extends Screened> (item: T, to: ScreenOutcomes<T>, over: Signal): void {
    const handler = this.settings!.pressureHandler
    if (handler === undefined) {
      this.shed(item, to, over)
      return
    }
    // As under-pressure: a promise, then the request goes on (unless it was answered); nullish,
    // it goes on now; anything else is sent as the answer. A handler that throws or rejects is
    // as if it were not given — the pressure 503 — unless it answered before it failed.
    this.handled++
    const { request, reply } = item
    const value = over === 'healthCheck' ? undefined : this.sampler!.readings[over]
    const failed = (error: unknown): void => {
      to.handler.failed(error)
      if (!reply.sent) this.shed(item, to, over)
    }
    let result: unknown
    try {
      result = handler(request, reply, over, value)
    } catch (error) {
      failed(error)
      return
    }
    const goOn = (): void => {
      to.handler.worked()
      if (!reply.sent) to.goOn(item)
    }
    if (isThenable(result)) Promise.resolve(result).then(goOn, failed).then(undefined, (error: unknown) => { to.lost(item, error) })
    else if (result === undefined || result === null) goOn()
    else {
      to.handler.worked()
      reply.send(result)
    }
  }

  /** The pressure 503, counted by the signal over its limit. */
  private shed<T extends Screened> (item: T, to: ScreenOutcomes<T>, over: Signal): void {
    this.shedBy[over]++
    to.shed(item, this.settings!.retryAfter, UNDER_PRESSURE, over)
  }

  /**
   * Retries are shed first (the gate's `retries`): while the queue-delay controller sees a standing
   * queue, a retry is shed whatever its age — `shed` with the queue's `Retry-After`, counted as
   * the queue's — and true is returned; otherwise false, and the retry is screened as any request.
   */
  shedsRetry<T extends Screened> (item: T, shed: ScreenOutcomes<T>['shed']): boolean {
    // Asked only where the queue-delay probe runs (the gate's step is assembled with it).
    if (!this.probe!.standing) return false
    this.shedBy.queueDelay++
    shed(item, this.queueRetry, OVERLOADED, 'queueDelay')
    return true
  }

  /** What it may shed for: each signal given a limit (the health check, when given), and queueing delay. */
  reasons (): ShedReason[] {
    const settings = this.settings
    const signals: ShedReason[] = settings === undefined ? [] : SIGNALS.filter((signal) => signal === 'healthCheck' ? settings.healthCheck !== undefined : settings.limits[signal] !== undefined)
    return this.probe === undefined ? signals : [...signals, 'queueDelay']
  }

  counts (): PressureCounts {
    return { shed: { ...this.shedBy }, handled: this.handled }
  }

  status (): PressureStatus {
    const sampler = this.sampler
    const probe = this.probe
    const over = sampler?.over
    const limits = this.settings?.limits
    return {
      underPressure: over !== undefined,
      ...(over === undefined ? {} : { reason: { signal: over, value: over === 'healthCheck' ? undefined : sampler!.readings[over], limit: limits![over] } }),
      ...(sampler === undefined ? {} : { readings: { ...sampler.readings }, limits: { ...limits } }),
      ...(probe === undefined
        ? {}
        : { queueDelay: { standing: probe.codel.shedding, delayMs: probe.delayMs, cutMs: probe.cutMs, targetMs: this.queue!.codel.targetMs, intervalMs: this.queue!.codel.intervalMs, acceptQueueStanding: probe.acceptQueueStanding } }),
      counts: this.counts()
    }
  }
}
