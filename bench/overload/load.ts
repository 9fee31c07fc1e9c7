// The overload generator: `node --import tsx bench/overload/load.ts`, started by run.ts under
// `taskset -c 1` with an IPC channel, one process per cell. It gets one LoadSpec, answers
// { started: epoch ms of the measured window's start } when the warm-up ends, then { result }, and exits.
//
// Open loop (`mode: 'open'`): request i is scheduled at t0 + i / rate (or, with `phases`, at the
// same spacing within each phase's rate), whatever the server answers. A 1 ms timer issues every
// request that is due (a batch per tick keeps the rate when the timer is late).
//
// Transport: the generator manages its own connections, raw `node:net` sockets writing HTTP/1.1 GETs
// and parsing the responses minimally (status line, Content-Length or chunked). No http.Agent, no
// undici Pool: a free list of idle connections (a stack, O(1) to take one), at most `sockets`
// connections open at once, opened lazily, at most `maxConnecting` connects in flight. A request that
// finds no free connection opens a new one if the cap allows, else waits in the generator's FIFO; the
// next connection to free up (or to finish connecting) takes the FIFO's head; a connect not done
// within the deadline is abandoned (a client's connect timeout). That wait is reported
// (client-side queueing). With `reconnect`, every request gets a fresh connection, sends
// `Connection: close` and the connection is reset after its response (a reconnect storm).
//
// Every request has a deadline `deadlineMs` after its scheduled time: it is aborted then (its
// connection destroyed, or it is dropped from the FIFO) and counts as a timeout. Latency is measured
// from the scheduled time (not from when the request left), so the generator's own lag is never
// hidden; that lag (issue time - scheduled time) is reported too (p50, p99, max).
//
// Closed loop (`mode: 'closed'`, the capacity probe): `concurrency` loops, each issuing its next
// request when the last one ends.
import net from 'node:net'
import { ERROR, PENDING, perSecond, type Second, TIMEOUT } from './seconds.js'
import { quantile } from './stats.js'
import { type UndiciClient, undiciClient } from './undici-client.js'

interface BaseSpec {
  port: number
  warmupMs: number
  measureMs: number
  deadlineMs: number
  /** The most connections open at once. */
  sockets: number
  binMs: number
  /** Every request on a fresh connection, closed after its response (`Connection: close`). */
  reconnect?: boolean
  /** Connects in flight at most (bounded connect rate) [256]. */
  maxConnecting?: number
  /** The client: the generator's own raw sockets [raw], or an undici Pool of `sockets` connections, one request at a time on each. */
  client?: ClientName
  /** Clients that retry (the recovery benchmark); absent: none does. */
  retry?: RetrySpec
}
export type ClientName = 'raw' | 'undici'
/**
 * Retries as default clients make them: up to `retries` more attempts of a request that was answered
 * 503, timed out or broke (per `on`), each `delayMs` after the last one ended, no jitter, no budget.
 * Every attempt carries `Retry-Attempt: <n>` (1: the first), the header the companion client sets;
 * each attempt has its own deadline, from its own due time. Retries due after the window are not sent.
 */
export interface RetrySpec { retries: number, delayMs: number, on: Array<'503' | 'timeout' | 'error'> }
/** From `atMs` after the measured window's start, the open loop's main stream runs at `rate` req/s (before the first phase: `rate`). */
export interface Phase { atMs: number, rate: number }
/**
 * A second stream mixed into an open loop (the priorities scenario): `rate` req/s more to `path`,
 * interleaved evenly with the main stream (which goes to `/sheddable` then, and to `/` otherwise).
 */
export interface MixSpec { path: string, mainPath: string, rate: number }
export interface OpenSpec extends BaseSpec { mode: 'open', rate: number, mix?: MixSpec, phases?: Phase[] }
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
  /** Connections the generator opened (aborts destroy connections; the generator opens new ones). */
  connections: number
  /** The cap on open connections, and the most that were open at once. */
  sockets: number
  maxOpen: number
  /** Connections that failed to connect or broke while a request was on them. */
  connectErrors: number
  bins: Bin[]
  /** With retries: per second of the window, by due time, first attempts and retries together. */
  seconds?: Second[]
  /** With retries: first attempts in the window, and attempts (requests sent) in it. */
  firstAttempts?: number
  /** With a mix: the main stream's and the mixed-in stream's own numbers. */
  streams?: { main: StreamResult, mixed: StreamResult }
  /** With phases: each stretch of the window at one rate (before the first phase, then each phase), by scheduled time. */
  segments?: SegmentResult[]
  cpu: NodeJS.CpuUsage
}

export interface SegmentResult {
  /** Its start and end, ms from the window's start. */
  fromMs: number
  toMs: number
  requests: number
  /** 200s within the deadline per second, their p99 (ms), and the shares of 503s and timeouts. */
  goodput: number
  okP99: number
  shed: number
  timeouts: number
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

interface Conn {
  socket: net.Socket
  /** The request on it, or -1 (idle, or still connecting with nothing assigned). */
  req: number
  connected: boolean
  dead: boolean
  buf: Buffer | undefined
}

const CRLF2 = Buffer.from('\r\n\r\n')
const CHUNK_END = Buffer.from('0\r\n\r\n')

/** The end of a complete response at the buffer's start and its status, or undefined when incomplete. */
function parseResponse (buf: Buffer): { end: number, status: number } | undefined {
  const headEnd = buf.indexOf(CRLF2)
  if (headEnd < 0) return undefined
  const head = buf.toString('latin1', 0, headEnd)
  const status = Number(head.slice(9, 12))
  const cl = /\r\ncontent-length:\s*(\d+)/i.exec(head)
  if (cl !== null) {
    const end = headEnd + 4 + Number(cl[1])
    return buf.length >= end ? { end, status } : undefined
  }
  if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) {
    const z = buf.indexOf(CHUNK_END, headEnd + 4)
    return z < 0 ? undefined : { end: z + CHUNK_END.length, status }
  }
  return { end: headEnd + 4, status }
}

function run (spec: LoadSpec): Promise<LoadResult> {
  return new Promise((resolve) => {
    const totalMs = spec.warmupMs + spec.measureMs
    const mix = spec.mode === 'open' ? spec.mix : undefined
    const rate = spec.mode === 'open' ? spec.rate + (mix?.rate ?? 0) : 0
    const share = mix === undefined ? 0 : mix.rate / rate
    const mixed = (i: number): boolean => Math.floor((i + 1) * share) > Math.floor(i * share)
    const t0 = performance.now() + 20
    const windowStart = t0 + spec.warmupMs
    const windowEnd = windowStart + spec.measureMs
    // The open loop's schedule, computed up front: constant spacing within each phase (rate changes at phase starts).
    let schedule: Float64Array | undefined
    if (spec.mode === 'open') {
      const phases = [{ at: t0, rate }, ...(spec.phases ?? []).map((p) => ({ at: windowStart + p.atMs, rate: p.rate + (mix?.rate ?? 0) }))]
        .sort((x, y) => x.at - y.at)
      const times: number[] = []
      for (let k = 0; k < phases.length; k++) {
        const from = phases[k]!.at
        const to = k + 1 < phases.length ? phases[k + 1]!.at : windowEnd
        const r = phases[k]!.rate
        if (r <= 0 || to <= from) continue
        for (let j = 0; ; j++) { const t = from + j * 1000 / r; if (t >= to) break; times.push(t) }
      }
      schedule = Float64Array.from(times)
    }
    const retry = spec.retry
    // Every first attempt may be retried `retries` times: room for all of them.
    const cap = schedule !== undefined ? schedule.length * (1 + (retry?.retries ?? 0)) : 1_000_000
    const attempt = new Uint8Array(cap)
    /** Retries waiting for their time: [due, attempt number], in due order (a fixed delay after ends that only grow). */
    const retryQueue: Array<[number, number]> = []
    let retryHead = 0
    let nextFirst = 0
    const undici = spec.client === 'undici'
    const sched = new Float64Array(cap)
    const issuedAt = new Float64Array(cap)
    const ended = new Float64Array(cap)
    const wait = new Float64Array(cap)
    const status = new Int16Array(cap)
    const gotSocket = new Uint8Array(cap)
    const connOf: Array<Conn | undefined> = []
    const paths = mix === undefined ? undefined : { main: mix.mainPath, mixed: mix.path }
    const requestBytes = (path: string): Buffer => Buffer.from(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${spec.port}\r\n${spec.reconnect === true ? 'Connection: close\r\n' : ''}\r\n`, 'latin1')
    const bytes = { root: requestBytes('/'), main: requestBytes(paths?.main ?? '/'), mixed: requestBytes(paths?.mixed ?? '/') }
    // With retries, every attempt says which it is (the attempt header); without, the bytes stay as they were.
    const attemptBytes = retry === undefined ? [] : Array.from({ length: retry.retries + 2 }, (_, n) => Buffer.from(bytes.root.toString('latin1').replace('\r\n\r\n', `\r\nRetry-Attempt: ${n}\r\n\r\n`), 'latin1'))
    const pathOf = (i: number): string => (mix === undefined ? '/' : mixed(i) ? mix.path : mix.mainPath)
    const client: UndiciClient | undefined = undici
      ? undiciClient(spec.port, spec.sockets, (i, code) => { settle(i, code === undefined ? ERROR : performance.now() - sched[i]! > spec.deadlineMs ? TIMEOUT : code, performance.now()) })
      : undefined
    const maxConnecting = Math.max(1, spec.maxConnecting ?? 256)
    const free: Conn[] = []
    const fifo: number[] = []
    let fifoHead = 0
    /** Requests in the FIFO still pending (timed-out ones stay in it until dequeued). */
    let queuedLive = 0
    const all = new Set<Conn>()
    let open = 0
    let connecting = 0
    let maxOpen = 0
    let connections = 0
    let connectErrors = 0
    let issued = 0
    let pending = 0
    let head = 0
    let stopped = false

    const settle = (i: number, code: number, now: number): void => {
      if (status[i] !== PENDING) return
      status[i] = code
      ended[i] = now
      if (gotSocket[i] === 0) queuedLive--
      connOf[i] = undefined
      pending--
      const reason = code === 503 ? '503' : code === TIMEOUT ? 'timeout' : code === ERROR ? 'error' : undefined
      if (retry !== undefined && reason !== undefined && attempt[i]! <= retry.retries && retry.on.includes(reason)) {
        const due = now + retry.delayMs
        if (due < windowEnd) retryQueue.push([due, attempt[i]! + 1])
      }
      if (spec.mode === 'closed' && !stopped) {
        if (now < windowEnd) issue(issued++, performance.now())
      }
    }

    const kill = (c: Conn): void => {
      if (c.dead) return
      c.dead = true
      all.delete(c)
      open--
      if (!c.connected) connecting--
      // A reset, not a FIN: no TIME_WAIT on either end. On one loopback host a reconnect storm's
      // TIME_WAIT sockets use up the 4-tuples within seconds, and a SYN that meets one is dropped
      // about half the time (random timestamp offsets): a 1 s retransmit the server never sees.
      if (c.connected) c.socket.resetAndDestroy()
      else c.socket.destroy()
      // A connection slot freed: a queued request may open one now.
      pump()
    }

    const send = (c: Conn, i: number): void => {
      c.req = i
      connOf[i] = c
      gotSocket[i] = 1
      wait[i] = performance.now() - issuedAt[i]!
      c.socket.write(retry !== undefined ? attemptBytes[attempt[i]!]! : mix === undefined ? bytes.root : mixed(i) ? bytes.mixed : bytes.main)
    }

    /** The next live request waiting in the FIFO, or -1. */
    const nextQueued = (): number => {
      while (fifoHead < fifo.length) {
        const i = fifo[fifoHead++]!
        if (status[i] === PENDING) { queuedLive--; return i }
      }
      if (fifoHead > 0) { fifo.length = 0; fifoHead = 0 }
      return -1
    }

    /** An idle (or just connected) connection takes the FIFO's head, or goes on the free list. */
    const idle = (c: Conn): void => {
      if (c.dead) return
      c.req = -1
      const i = nextQueued()
      if (i >= 0) send(c, i)
      else if (spec.reconnect === true) kill(c)
      else free.push(c)
    }

    const connect = (): void => {
      open++
      connecting++
      connections++
      if (open > maxOpen) maxOpen = open
      const socket = net.connect({ host: '127.0.0.1', port: spec.port, noDelay: true })
      const c: Conn = { socket, req: -1, connected: false, dead: false, buf: undefined }
      all.add(c)
      // A connect that outlives the deadline is abandoned, as a client's connect timeout does: left
      // alone, one whose SYN met a full listen backlog retries for minutes (1 s, 3 s, 7 s …) and holds
      // a connect slot the whole time, so a cell that once overflowed the backlog never reconnects.
      const connectTimer = setTimeout(() => { if (!c.connected) kill(c) }, spec.deadlineMs)
      socket.once('connect', () => {
        clearTimeout(connectTimer)
        c.connected = true
        connecting--
        idle(c)
        // A connect slot freed: requests still queued may open more.
        pump()
      })
      socket.on('data', (chunk: Buffer) => {
        c.buf = c.buf === undefined ? chunk : Buffer.concat([c.buf, chunk])
        const parsed = parseResponse(c.buf)
        if (parsed === undefined) return
        const i = c.req
        c.buf = parsed.end < c.buf.length ? c.buf.subarray(parsed.end) : undefined
        if (i >= 0) {
          const t = performance.now()
          settle(i, t - sched[i]! > spec.deadlineMs ? TIMEOUT : parsed.status, t)
        }
        if (spec.reconnect === true) { kill(c); return }
        idle(c)
      })
      const broken = (): void => {
        if (c.dead) return
        if (c.req >= 0 && status[c.req] === PENDING) { connectErrors++; settle(c.req, ERROR, performance.now()) } else if (!c.connected) connectErrors++
        kill(c)
      }
      socket.on('error', broken)
      socket.on('close', broken)
    }

    /** Opens connections for queued requests, up to the caps. */
    const pump = (): void => {
      let want = queuedLive - connecting
      while (want > 0 && open < spec.sockets && connecting < maxConnecting) { connect(); want-- }
    }

    const issue = (i: number, now: number): void => {
      if (i >= cap) return
      issuedAt[i] = now
      if (spec.mode === 'closed') sched[i] = now
      pending++
      if (client !== undefined) {
        gotSocket[i] = 2
        client.send(i, pathOf(i), retry === undefined ? undefined : { 'retry-attempt': String(attempt[i]) })
        return
      }
      if (spec.reconnect !== true) {
        while (free.length > 0) {
          const c = free.pop()!
          if (!c.dead) { send(c, i); return }
        }
      }
      fifo.push(i)
      queuedLive++
      if (open < spec.sockets && connecting < maxConnecting) connect()
    }

    const sweep = (now: number): void => {
      // Deadlines are in issue order (scheduled times only grow), so expired requests are at the front.
      // (A retry is due when it is issued, a first attempt up to the generator's lag earlier: a retry's
      // timeout may wait that long for the first attempts issued just after it.)
      while (head < issued && (status[head] !== PENDING || sched[head]! + spec.deadlineMs <= now)) {
        if (status[head] === PENDING) {
          const c = connOf[head]
          settle(head, TIMEOUT, now)
          if (c !== undefined) kill(c)
          client?.abort(head)
        }
        head++
      }
    }

    let startedSent = false
    const tick = (): void => {
      const now = performance.now()
      if (!startedSent && now >= windowStart) { startedSent = true; process.send?.({ started: performance.timeOrigin + windowStart }) }
      if (schedule !== undefined) {
        if (!stopped) {
          while (nextFirst < schedule.length && schedule[nextFirst]! <= now) { sched[issued] = schedule[nextFirst++]!; attempt[issued] = 1; issue(issued++, performance.now()) }
          // Stop once every request scheduled before the window's end is out, however late the generator is.
          if (nextFirst >= schedule.length) stopped = true
        }
        while (retryHead < retryQueue.length && retryQueue[retryHead]![0] <= now && issued < cap) {
          const [due, n] = retryQueue[retryHead++]!
          sched[issued] = due
          attempt[issued] = n
          issue(issued++, performance.now())
        }
      } else if (now >= windowEnd) {
        stopped = true
      }
      sweep(now)
      if (client !== undefined && client.connected() > maxOpen) maxOpen = client.connected()
      if (!stopped || pending > 0 || retryHead < retryQueue.length) { setTimeout(tick, 1); return }
      for (const c of all) c.socket.destroy()
      const result = summarize()
      if (client === undefined) resolve(result)
      else void client.close().then(() => { resolve(result) }, () => { resolve(result) })
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

    const segments = (phases: Phase[]): SegmentResult[] => {
      const cuts = [0, ...phases.map((p) => p.atMs).filter((t) => t > 0 && t < spec.measureMs).sort((a, b) => a - b), spec.measureMs]
      return cuts.slice(0, -1).map((fromMs, k) => {
        const toMs = cuts[k + 1]!
        const ok: number[] = []
        let requests = 0
        let shed = 0
        let timeouts = 0
        for (let i = 0; i < issued; i++) {
          const t = sched[i]! - windowStart
          if (t < fromMs || t >= toMs) continue
          requests++
          const s = status[i]!
          if (s === 200) ok.push(ended[i]! - sched[i]!)
          else if (s === 503) shed++
          else if (s === TIMEOUT) timeouts++
        }
        return { fromMs, toMs, requests, goodput: ok.length / ((toMs - fromMs) / 1000), okP99: quantile(ok, 0.99), shed: shed / Math.max(1, requests), timeouts: timeouts / Math.max(1, requests) }
      })
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
      let firstAttempts = 0
      for (let i = 0; i < issued; i++) {
        if (issuedAt[i]! >= windowStart && issuedAt[i]! < windowEnd) issuedInWindow++
        if (!inWindow(i)) continue
        requests++
        const latency = ended[i]! - sched[i]!
        const binTime = spec.mode === 'open' ? sched[i]! : ended[i]!
        const bin = Math.max(0, Math.min(nBins - 1, Math.floor((binTime - windowStart) / spec.binMs)))
        lag.push(issuedAt[i]! - sched[i]!)
        if (gotSocket[i] === 1) { queueWait.push(wait[i]!); if (wait[i]! > 1) queued++ }
        if (attempt[i] === 1) firstAttempts++
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
        // undici's queue is its own: the wait for a connection is not seen (NaN, not 0).
        queuedShare: undici ? Number.NaN : requests === 0 ? 0 : queued / requests,
        queueWaitP99: quantile(queueWait, 0.99),
        connections,
        sockets: spec.sockets,
        maxOpen,
        connectErrors,
        ...(mix === undefined ? {} : { streams: { main: stream(false), mixed: stream(true) } }),
        ...(spec.mode === 'open' && spec.phases !== undefined ? { segments: segments(spec.phases) } : {}),
        ...(retry === undefined ? {} : { seconds: perSecond({ count: issued, due: sched, ended, status, attempt }, windowStart, Math.ceil(spec.measureMs / 1000)), firstAttempts }),
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
