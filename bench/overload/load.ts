// The overload generator: `node --import tsx bench/overload/load.ts`, started by run.ts under
// `taskset -c 1` with an IPC channel, one process per cell. It gets one LoadSpec, answers
// { started: epoch ms of the measured window's start } when the warm-up ends, then { result }, and exits.
//
// Open loop (`mode: 'open'`): request i is scheduled at t0 + i / rate, whatever the server answers.
// A 1 ms timer issues every request that is due (a batch per tick keeps the rate when the timer is
// late). Requests go through one keep-alive http.Agent with `sockets` connections: a request that finds
// none free waits in the agent's queue, and that wait is reported (client-side queueing). Every
// request has a deadline `deadlineMs` after its scheduled time: it is aborted then (socket destroyed,
// or dropped from the agent's queue) and counts as a timeout. Latency is measured from the scheduled
// time (not from when the request left), so the generator's own lag is never hidden; that lag
// (issue time - scheduled time) is reported too.
//
// Closed loop (`mode: 'closed'`, the capacity probe): `concurrency` loops, each issuing its next
// request when the last one ends.
import http from 'node:http'
import { quantile } from './stats.js'

interface BaseSpec { port: number, warmupMs: number, measureMs: number, deadlineMs: number, sockets: number, binMs: number }
/**
 * A second stream mixed into an open loop (the priorities scenario): `rate` req/s more to `path`,
 * interleaved evenly with the main stream (which goes to `/sheddable` then, and to `/` otherwise).
 */
export interface MixSpec { path: string, mainPath: string, rate: number }
export interface OpenSpec extends BaseSpec { mode: 'open', rate: number, mix?: MixSpec }
export interface ClosedSpec extends BaseSpec { mode: 'closed', concurrency: number }
export type LoadSpec = OpenSpec | ClosedSpec
/** A spec before the server's port is known. */
export type CellSpec = Omit<OpenSpec, 'port'> | Omit<ClosedSpec, 'port'>

export interface Bin {
  /** 200s within the deadline per second, among requests scheduled in this bin. */
  goodput: number
  /** p99 latency of those 200s (ms). */
  okP99: number
  shed: number
  timeouts: number
}

export interface LoadResult {
  /** The rate asked for (open loop), req/s. */
  targetRate: number
  /** Requests issued per second in the measured window. */
  achievedRate: number
  /** Requests scheduled in the measured window (open) / ended in it (closed). */
  requests: number
  ok: number
  shed: number
  timeouts: number
  /** Timeouts that never got a connection (expired in the client's queue). */
  timeoutsQueued: number
  errors: number
  otherStatus: number
  goodput: number
  okP50: number
  okP99: number
  shedP99: number
  /** Issue time - scheduled time (ms). */
  lagP50: number
  lagP99: number
  lagMax: number
  /** Share of requests that waited more than 1 ms for a free connection, and the p99 of that wait (ms). */
  queuedShare: number
  queueWaitP99: number
  /** Connections the agent opened (aborts destroy connections; the agent opens new ones). */
  connections: number
  bins: Bin[]
  /** With a mix: the main stream's and the mixed-in stream's own numbers. */
  streams?: { main: StreamResult, mixed: StreamResult }
  cpu: NodeJS.CpuUsage
}

export interface StreamResult {
  /** Requests scheduled in the window, per second. */
  offered: number
  /** 200s within the deadline, per second. */
  goodput: number
  okP99: number
  shed: number
  timeouts: number
}

const PENDING = 0
const TIMEOUT = -1
const ERROR = -2

function run (spec: LoadSpec): Promise<LoadResult> {
  return new Promise((resolve) => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: spec.sockets, maxFreeSockets: spec.sockets, scheduling: 'fifo' })
    const totalMs = spec.warmupMs + spec.measureMs
    const mix = spec.mode === 'open' ? spec.mix : undefined
    const rate = spec.mode === 'open' ? spec.rate + (mix?.rate ?? 0) : 0
    // Request i belongs to the mixed-in stream when it crosses a multiple of the stream's share: exact proportions, evenly spaced.
    const share = mix === undefined ? 0 : mix.rate / rate
    const mixed = (i: number): boolean => Math.floor((i + 1) * share) > Math.floor(i * share)
    const cap = spec.mode === 'open' ? Math.ceil(rate * totalMs / 1000) + 1 : 1_000_000
    const sched = new Float64Array(cap)
    const issuedAt = new Float64Array(cap)
    const ended = new Float64Array(cap)
    const wait = new Float64Array(cap)
    const status = new Int16Array(cap)
    const gotSocket = new Uint8Array(cap)
    const reqs: Array<http.ClientRequest | undefined> = []
    const sockets = new WeakSet<object>()
    let connections = 0
    let issued = 0
    let pending = 0
    let head = 0
    let stopped = false
    const t0 = performance.now() + 20
    const windowStart = t0 + spec.warmupMs
    const windowEnd = windowStart + spec.measureMs

    const settle = (i: number, code: number, now: number): void => {
      if (status[i] !== PENDING) return
      status[i] = code
      ended[i] = now
      reqs[i] = undefined
      pending--
      if (spec.mode === 'closed' && !stopped) {
        if (now < windowEnd) issue(issued++, performance.now())
      }
    }

    const issue = (i: number, now: number): void => {
      if (i >= cap) return
      issuedAt[i] = now
      if (spec.mode === 'closed') sched[i] = now
      pending++
      const req = http.request({ agent, host: '127.0.0.1', port: spec.port, path: mix === undefined ? '/' : mixed(i) ? mix.path : mix.mainPath, method: 'GET' })
      reqs[i] = req
      req.once('socket', (socket) => {
        gotSocket[i] = 1
        wait[i] = performance.now() - issuedAt[i]!
        if (!sockets.has(socket)) { sockets.add(socket); connections++ }
      })
      req.once('response', (res) => {
        res.on('error', () => {})
        res.resume()
        res.once('end', () => {
          const t = performance.now()
          settle(i, t - sched[i]! > spec.deadlineMs ? TIMEOUT : (res.statusCode ?? 0), t)
        })
      })
      req.on('error', () => { settle(i, ERROR, performance.now()) })
      req.end()
    }

    const sweep = (now: number): void => {
      // Deadlines are in issue order (scheduled times only grow), so expired requests are at the front.
      while (head < issued && (status[head] !== PENDING || sched[head]! + spec.deadlineMs <= now)) {
        if (status[head] === PENDING) {
          const req = reqs[head]
          settle(head, TIMEOUT, now)
          req?.destroy()
        }
        head++
      }
    }

    let startedSent = false
    const tick = (): void => {
      const now = performance.now()
      if (!startedSent && now >= windowStart) { startedSent = true; process.send?.({ started: performance.timeOrigin + windowStart }) }
      if (spec.mode === 'open') {
        if (!stopped) {
          const due = Math.min(cap, Math.floor((now - t0) * rate / 1000) + 1)
          while (issued < due) { sched[issued] = t0 + issued * 1000 / rate; issue(issued++, performance.now()) }
          // Stop once every request scheduled before the window's end is out, however late the generator is.
          if (issued >= cap || t0 + issued * 1000 / rate >= windowEnd) stopped = true
        }
      } else if (now >= windowEnd) {
        stopped = true
      }
      sweep(now)
      if (!stopped || pending > 0) { setTimeout(tick, 1); return }
      agent.destroy()
      resolve(summarize())
    }

    const stream = (second: boolean): StreamResult => {
      const ok: number[] = []
      let requests = 0
      let shed = 0
      let timeouts = 0
      for (let i = 0; i < issued; i++) {
        if (mixed(i) !== second || sched[i]! < windowStart || sched[i]! >= windowEnd) continue
        requests++
        const s = status[i]!
        if (s === 200) ok.push(ended[i]! - sched[i]!)
        else if (s === 503) shed++
        else if (s === TIMEOUT) timeouts++
      }
      const seconds = spec.measureMs / 1000
      return { offered: requests / seconds, goodput: ok.length / seconds, okP99: quantile(ok, 0.99), shed: shed / Math.max(1, requests), timeouts: timeouts / Math.max(1, requests) }
    }

    const summarize = (): LoadResult => {
      const inWindow = (i: number): boolean => spec.mode === 'open'
        ? sched[i]! >= windowStart && sched[i]! < windowEnd
        : ended[i]! >= windowStart && ended[i]! < windowEnd
      const ok: number[] = []
      const shed: number[] = []
      const lag: number[] = []
      const queueWait: number[] = []
      const nBins = Math.ceil(spec.measureMs / spec.binMs)
      const binOk: number[][] = Array.from({ length: nBins }, () => [])
      const binShed = new Array<number>(nBins).fill(0)
      const binTimeouts = new Array<number>(nBins).fill(0)
      let requests = 0
      let timeouts = 0
      let timeoutsQueued = 0
      let errors = 0
      let otherStatus = 0
      let queued = 0
      let issuedInWindow = 0
      for (let i = 0; i < issued; i++) {
        if (issuedAt[i]! >= windowStart && issuedAt[i]! < windowEnd) issuedInWindow++
        if (!inWindow(i)) continue
        requests++
        const latency = ended[i]! - sched[i]!
        const binTime = spec.mode === 'open' ? sched[i]! : ended[i]!
        const bin = Math.max(0, Math.min(nBins - 1, Math.floor((binTime - windowStart) / spec.binMs)))
        lag.push(issuedAt[i]! - sched[i]!)
        if (gotSocket[i] === 1) { queueWait.push(wait[i]!); if (wait[i]! > 1) queued++ }
        const s = status[i]!
        if (s === 200) { ok.push(latency); binOk[bin]!.push(latency) } else if (s === 503) { shed.push(latency); binShed[bin]!++ } else if (s === TIMEOUT) {
          timeouts++; binTimeouts[bin]!++
          if (gotSocket[i] === 0) timeoutsQueued++
        } else if (s === ERROR) errors++
        else otherStatus++
      }
      const seconds = spec.measureMs / 1000
      return {
        targetRate: spec.mode === 'open' ? rate : Number.NaN,
        achievedRate: issuedInWindow / seconds,
        requests,
        ok: ok.length,
        shed: shed.length,
        timeouts,
        timeoutsQueued,
        errors,
        otherStatus,
        goodput: ok.length / seconds,
        okP50: quantile(ok, 0.5),
        okP99: quantile(ok, 0.99),
        shedP99: quantile(shed, 0.99),
        lagP50: quantile(lag, 0.5),
        lagP99: quantile(lag, 0.99),
        lagMax: lag.length === 0 ? Number.NaN : lag.reduce((m, x) => (x > m ? x : m), -Infinity),
        queuedShare: requests === 0 ? 0 : queued / requests,
        queueWaitP99: quantile(queueWait, 0.99),
        connections,
        ...(mix === undefined ? {} : { streams: { main: stream(false), mixed: stream(true) } }),
        bins: binOk.map((o, b) => ({ goodput: o.length / (spec.binMs / 1000), okP99: quantile(o, 0.99), shed: binShed[b]!, timeouts: binTimeouts[b]! })),
        cpu: process.cpuUsage()
      }
    }

    setTimeout(() => {
      if (spec.mode === 'closed') for (let c = 0; c < spec.concurrency; c++) issue(issued++, performance.now())
      tick()
    }, Math.max(0, t0 - performance.now()))
  })
}

process.once('message', (spec: LoadSpec) => {
  run(spec).then(
    (result) => { process.send?.({ result }, () => { process.exit(0) }) },
    (error: unknown) => { process.send?.({ error: String(error) }, () => { process.exit(1) }) }
  )
})
process.on('disconnect', () => { process.exit(0) })
