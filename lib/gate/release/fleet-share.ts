import type { FastifyBaseLogger } from 'fastify'
import { performance } from 'node:perf_hooks'
import { fleetShare, heldShare, type HeldShare } from '../../core/fleet-share.js'
import type { FleetMember, FleetView } from '../../rates/backend.js'
import type { Slots } from './slots.js'

/**
 * A fleet's in-flight limit, kept by this process (`maxInFlight: { fleet }`): on a timer (unref'd,
 * one refresh at a time, never per request) the membership is renewed and the fleet read, and
 * this process's share of the limit becomes its slots' limit (with the adaptive limit, the
 * smaller of the two). Until the first answer the share is one slot: a process that does not yet
 * know its fleet must not take the whole limit. When Redis cannot answer, the last share stands
 * (logged once until a refresh works again); the process's entry lapses after its TTL, and the
 * others take its part at their next refresh.
 *
 * A share is never raised before the shares it takes from have lapsed (`heldShare`): after Redis
 * restarts empty, the first member to renew sees itself alone, and taking the whole limit at once
 * would run many times the limit while the others keep their shares. Members registered with
 * different limits at one address (two deployments) each take their share of the least one, and
 * say so once.
 */
export class FleetShare {
  /** The fleet as last seen, and this process's share of it; undefined before the first answer. */
  view: (FleetView & { readonly share: number }) | undefined = undefined
  private readonly member: FleetMember
  private readonly limit: number
  private readonly refreshMs: number
  private readonly ttlMs: number
  private readonly clock: () => number
  private held: HeldShare | undefined = undefined
  private toldLimits = false
  private readonly slots: Slots
  private readonly log: FastifyBaseLogger
  private timer: NodeJS.Timeout | undefined = undefined
  private stopped = false
  private failing = false

  constructor (member: FleetMember, settings: { readonly fleet: number, readonly refreshMs: number, readonly ttlMs: number }, slots: Slots, log: FastifyBaseLogger, clock: () => number = () => performance.now()) {
    this.member = member
    this.limit = settings.fleet
    this.refreshMs = settings.refreshMs
    this.ttlMs = settings.ttlMs
    this.clock = clock
    this.slots = slots
    this.log = log
    slots.setShare(1)
  }

  /** The first refresh (awaited at `onReady`), then one every `refreshMs`. */
  async start (): Promise<void> {
    await this.refresh()
  }

  private readonly tick = (): void => {
    this.timer = undefined
    void this.refresh()
  }

  private async refresh (): Promise<void> {
    try {
      const view = await this.member.refresh()
      if (view.least !== view.most && !this.toldLimits) {
        this.toldLimits = true
        this.log.warn({ least: view.least, most: view.most }, `fastify-admission: the fleet's members were registered with different limits (from ${view.least} to ${view.most}); each takes its share of the least`)
      }
      const limit = view.least === 0 ? this.limit : Math.min(this.limit, view.least)
      this.held = heldShare(this.held, fleetShare(limit, view.members, view.rank), view.members, this.clock(), this.ttlMs)
      const share = this.held.share
      this.view = { ...view, share }
      this.slots.setShare(share)
      this.failing = false
    } catch (error) {
      if (!this.failing) {
        this.failing = true
        this.log.warn({ err: error }, `fastify-admission: the fleet's membership could not be refreshed; this process keeps its share of ${this.view?.share ?? 1} in flight until it can (logged once until it works again)`)
      }
    }
    if (!this.stopped) {
      this.timer = setTimeout(this.tick, this.refreshMs)
      this.timer.unref()
    }
  }

  /** No more refreshes; the entry is removed, so the others take this share at their next refresh. */
  async stop (): Promise<void> {
    this.stopped = true
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
    try {
      await this.member.leave()
    } catch (error) {
      this.log.warn({ err: error }, 'fastify-admission: could not leave the fleet; its entry lapses with its TTL')
    }
  }
}
