import type { RatesBackend } from './backend.js'

/** What every caller of one registration shares: the backend and whether it has stopped. */
export class RatesRuntime {
  readonly backend: RatesBackend
  /** Whether stopping the runtime stops the backend: only when the plugin made it. */
  private readonly owned: boolean
  private stopped = false

  constructor (backend: RatesBackend, owned: boolean) {
    this.backend = backend
    this.owned = owned
  }

  get isStopped (): boolean {
    return this.stopped
  }

  async stop (): Promise<void> {
    this.stopped = true
    if (this.owned) await this.backend.stop()
  }
}
