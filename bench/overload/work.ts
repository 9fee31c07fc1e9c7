// The two work models a benchmark server's handler runs (issue 11, §1).
//  - cpu: the handler burns `cpuMs` of wall time synchronously (a spin on the clock), so one core
//    serves about 1000 / cpuMs requests a second and the event loop is blocked meanwhile.
//  - downstream: the handler takes one of `poolSize` "connections" of a pool for `opMs` (a
//    setTimeout), so the pool serves about poolSize * 1000 / opMs operations a second; excess work
//    waits in the pool's FIFO queue (unbounded, as in most client pools), the event loop stays idle.
export type ModelName = 'cpu' | 'downstream'
export const MODELS: readonly ModelName[] = ['cpu', 'downstream']

export interface WorkSettings {
  cpuMs: number
  poolSize: number
  opMs: number
}

/** Spins until `ms` of wall time have passed. Wall time, not a calibrated amount of work: on a
 * shared core the spin keeps the loop blocked ~`ms` whatever other processes take, so C stays put. */
export function spin (ms: number): void {
  const end = performance.now() + ms
  while (performance.now() < end) { /* burn */ }
}

export class DownstreamPool {
  private busy = 0
  private queue: Array<() => void> = []
  private head = 0
  /** Multiplies the time of operations that start from now on (the step's slowdown). */
  factor = 1
  /** Operations completed, and the largest queue seen. */
  done = 0
  maxQueued = 0

  constructor (private readonly size: number, private readonly opMs: number) {}

  get queued (): number { return this.queue.length - this.head }

  run (): Promise<void> {
    return new Promise((resolve) => {
      if (this.busy < this.size) { this.start(resolve); return }
      this.queue.push(resolve)
      if (this.queued > this.maxQueued) this.maxQueued = this.queued
    })
  }

  private start (resolve: () => void): void {
    this.busy++
    setTimeout(() => {
      this.busy--
      this.done++
      resolve()
      this.next()
    }, this.opMs * this.factor)
  }

  private next (): void {
    if (this.head < this.queue.length && this.busy < this.size) {
      const resolve = this.queue[this.head]!
      this.queue[this.head++] = undefined as unknown as () => void
      if (this.head > 4096 && this.head * 2 > this.queue.length) { this.queue = this.queue.slice(this.head); this.head = 0 }
      this.start(resolve)
    }
  }
}
