import type { Socket } from 'node:net'
import { performance, type EventLoopUtilization } from 'node:perf_hooks'
import { codelSample, newCodel, type Codel } from '../core/index.js'
import type { QueueDelaySettings } from './options.js'

/**
 * Shedding on queueing delay, for work that queues in the event loop (synchronous CPU: the
 * in-flight count stays at one or two while the backlog waits in the sockets' kernel buffers).
 * Two measures, each a lower bound of how long a request waited, and the CoDel controller:
 *
 * - **The loop's lateness**, off the request path: a timer every `intervalMs / 10` ms (10 ms by
 *   default), unref'd; a tick due at `t` that runs at `t + d` was held back by `d` ms of other work,
 *   as was a request whose bytes arrived at `t`; or, when longer, the longest turn of the loop that
 *   read requests since the last tick (a request that arrived as it began waited it out: once the
 *   cut below keeps turns short, a tick often falls between them and measures little, while every
 *   turn still runs past the target). The samples go into the pure CoDel controller
 *   (`lib/core/adaptive/codel.ts`): above `targetMs` for a whole `intervalMs` is a standing queue
 *   (a burst the server absorbs within an interval is not), and while it stands the control law
 *   counts up, faster the longer it lasts (its `count`).
 * - **Each request's age in its turn of the loop**: Node does not say when a request's bytes
 *   arrived, but every socket read in one turn of the loop was ready when the turn's poll began,
 *   so a request parsed `a` ms after the turn's first request had waited at least `a` ms (one clock
 *   read per request; a `setImmediate` per turn marks its end). Under a CPU-bound overload a turn
 *   reads hundreds of requests and runs for hundreds of ms: the requests late in it have waited.
 *
 * - **The accept queue**: Node accepts one connection per turn of the loop, so under a CPU-bound
 *   overload its turns, not the kernel, set how fast new connections get in; those waiting in the
 *   listen backlog (their request already written) wait as long as it takes, and neither measure
 *   above sees it (each turn reads one fresh request, on time). The queue stands when a connection
 *   was accepted in every tick of a whole interval while the loop was never idle (utilization at
 *   least 0.98: an idle loop woken by each connection also accepts one per turn, but waits in
 *   between). A connection accepted while it stands waited in it: its first request is shed, so
 *   the turns stay short and the backlog drains; the connection lives on (keep-alive) and its next
 *   requests are judged by their age like any other.
 *
 * A request older than the **cut** is shed. The cut is `intervalMs` while the controller has no
 * live count (nothing but a request that waited a whole interval is shed, so bursts pass), and
 * `intervalMs / count` once it has, never under `targetMs`: the longer the standing queue lasts
 * (CoDel's control law counts faster and faster), the less a request may wait. With the defaults
 * it halves after 100 ms of standing queue and reaches the 5 ms target after about 0.8 s (count
 * 20). The count lives on between the controller's episodes (for 16 intervals after its last step,
 * as the controller itself resumes from it), so a cut turn whose lateness dips under the target
 * does not reopen the gates.
 *
 * It sheds the requests that waited, not a share of all: the ones served are the fresh ones, so
 * their latency stays near the cut. Why not CoDel's shed share (`codelSheds`): under an open-loop
 * overload a share sheds requests whatever their age, so those served still wait behind the whole
 * turn, and CoDel's exit at the first sample under target drops the share to 0 while the offered
 * load goes on (bench/overload/README.md has the measurements).
 */
/** A tick counts towards a standing accept queue at this utilization of the loop or above. */
const BUSY_LOOP = 0.98

function loopUtilization (): () => number {
  let last: EventLoopUtilization = performance.eventLoopUtilization()
  return () => {
    const now = performance.eventLoopUtilization()
    const since = performance.eventLoopUtilization(now, last)
    last = now
    return since.utilization
  }
}

export class DelayProbe {
  codel: Codel = newCodel()
  /** The latest lateness measured, ms. */
  delayMs = 0
  /** A request that waited longer than this in its turn of the loop is shed, ms. */
  cutMs: number
  /** Connections were accepted in every tick of the last interval, the loop never idle. */
  acceptQueueStanding = false
  readonly periodMs: number
  readonly clock: () => number
  private readonly targetMs: number
  private readonly intervalMs: number
  private readonly settings: QueueDelaySettings
  private readonly utilization: () => number
  private timer: NodeJS.Timeout | undefined
  /** Connections accepted since the last tick, and ticks in a row that accepted one on a busy loop. */
  private accepts = 0
  private busyAcceptTicks = 0
  /** Connections accepted while the accept queue stood, whose first request is still to come. */
  private waited = new WeakSet<object>()
  private anyWaited = false
  private lastWaitedAt = 0
  private due = 0
  /** The clock at the first and the latest request of this turn of the loop, and whether a turn is open. */
  private turnStart = 0
  private turnLast = 0
  private turnOpen = false
  /** The longest turn that read requests since the last tick, ms. */
  private longestTurn = 0
  private readonly endTurn = (): void => {
    this.turnOpen = false
    const length = this.turnLast - this.turnStart
    if (length > this.longestTurn) this.longestTurn = length
  }

  constructor (settings: QueueDelaySettings) {
    this.settings = settings
    this.clock = settings.clock ?? (() => performance.now())
    this.targetMs = settings.codel.targetMs
    this.intervalMs = settings.codel.intervalMs
    this.periodMs = Math.max(1, Math.floor(this.intervalMs / 10))
    this.cutMs = this.intervalMs
    this.utilization = settings.utilization ?? loopUtilization()
  }

  /** The server's `connection` listener: counts the accept, and marks one that waited in a standing accept queue. */
  readonly accepted = (socket: Socket): void => {
    this.accepts++
    this.secured(socket)
  }

  /** The TLS server's `secureConnection` listener: its requests arrive on the TLS socket, not the TCP one. */
  readonly secured = (socket: Socket): void => {
    if (this.acceptQueueStanding) {
      this.waited.add(socket)
      this.anyWaited = true
      this.lastWaitedAt = this.clock()
    }
  }

  /** A standing queue: the controller sheds, its cut is still short from a recent episode, or connections wait to be accepted. */
  get standing (): boolean {
    return this.codel.shedding || this.cutMs < this.intervalMs || this.acceptQueueStanding
  }

  start (): void {
    this.due = this.clock() + this.periodMs
    this.timer = setTimeout(() => {
      this.tick()
      this.timer?.refresh()
    }, this.periodMs).unref()
  }

  stop (): void {
    clearTimeout(this.timer)
  }

  /**
   * One sample into the controller: the tick's lateness, or the longest turn that read requests
   * since the last tick if longer (a request that arrived as that turn began waited it out).
   */
  tick (): void {
    const now = this.clock()
    // A clock that steps back (a fake one) measures no delay.
    this.delayMs = Math.max(0, now - this.due, this.longestTurn)
    this.longestTurn = 0
    this.due = now + this.periodMs
    this.busyAcceptTicks = this.accepts > 0 && this.utilization() >= BUSY_LOOP ? this.busyAcceptTicks + 1 : 0
    this.accepts = 0
    this.acceptQueueStanding = this.busyAcceptTicks * this.periodMs >= this.intervalMs
    // A client writes its request as it connects: a mark older than an interval is of a connection that sent none.
    if (this.anyWaited && !this.acceptQueueStanding && now - this.lastWaitedAt > this.intervalMs) {
      this.waited = new WeakSet()
      this.anyWaited = false
    }
    const codel = codelSample(this.codel, { delay: this.delayMs, now }, this.settings.codel)
    this.codel = codel
    // The controller resumes from its count within 16 intervals of its last step; so does the cut.
    const live = codel.count > 0 && now - codel.nextAt < 16 * this.intervalMs
    this.cutMs = live ? Math.max(this.targetMs, this.intervalMs / codel.count) : this.intervalMs
  }

  /** Whether the request being read now, on `socket`, has waited too long: true to shed it. */
  sheds (socket: object): boolean {
    if (this.anyWaited && this.waited.delete(socket)) return true
    const now = this.clock()
    this.turnLast = now
    if (!this.turnOpen) {
      this.turnOpen = true
      this.turnStart = now
      setImmediate(this.endTurn)
      return false
    }
    return now - this.turnStart > this.cutMs
  }
}
