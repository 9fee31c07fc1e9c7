// A deterministic model of the cpu cells of the overload benchmark, to judge the queue-delay
// shedder's policy apart from a shared machine's noise: `node --import tsx bench/overload/simulate.ts`.
// It runs the plugin's own DelayProbe (lib/pressure/delay-probe.ts) on a simulated clock.
//
// The model: 512 client connections, one request outstanding on each; requests are scheduled at a
// constant rate (open loop) and wait in the client for a free connection; a client gives up 1 s
// after a request's scheduled time (a timeout; its connection is replaced, and the server pays an
// accept for the new one). The server is one event loop: a turn takes every request that had
// arrived when it began, in arrival order; each costs PARSE_MS, then either SERVE_MS (a 200) or
// REFUSE_MS (a 503). Between turns the probe's timer runs when due (its lateness, and the turns'
// lengths, measured as in the plugin). Capacity C = 1 / (PARSE_MS + SERVE_MS). Policies: `none`;
// `share`, the first design (CoDel's Bresenham share of a request counter, `codelSheds`); `cut`,
// the plugin's (a request older than the cut in its turn is shed).
//
// SIM_RECOVERY=1 runs the recovery benchmark's cpu cell instead (README, "Recovery"): 0.8 C, 4 C for
// 10 s, 0.8 C again, clients that retry a 503 or a timeout at once, up to 3 times; per second,
// goodput / C and the retries' share. SIM_LOADS, SIM_POLICIES and SIM_SOCKETS override the loads,
// the policies and the 512 connections (the benchmark's raw client may open 2 × C × deadline).
import { codelOptions, codelSheds } from '../../lib/core/index.js'
import { DelayProbe } from '../../lib/pressure/delay-probe.js'

// Costs in ms (PARSE_MS for every request, ACCEPT_MS more for the first on a new connection),
// and the benchmark's client and cell settings.
const env = process.env
const { PARSE_MS, SERVE_MS, REFUSE_MS, ACCEPT_MS, SOCKETS, DEADLINE_MS, WARMUP_MS } =
  { PARSE_MS: 0.03, SERVE_MS: 1, REFUSE_MS: 0.02, ACCEPT_MS: 0.05, SOCKETS: Number(env.SIM_SOCKETS ?? 512), DEADLINE_MS: 1000, WARMUP_MS: 1000 }
const RECOVERY = env.SIM_RECOVERY === '1'
/** The recovery cell: [from ms after the warm-up, × C]; its retries. */
const PHASES: Array<[number, number]> = [[0, 0.8], [3000, 4], [13_000, 0.8]]
const MEASURE_MS = RECOVERY ? 21_000 : 5000
const RETRIES = RECOVERY ? 3 : 0
const C = 1000 / (PARSE_MS + SERVE_MS)

type Policy = 'none' | 'share' | 'cut'

interface Result { goodput: number, p99: number, shed: number, timeouts: number, seconds: Array<{ goodput: number, retryShare: number }> }

/** First attempts' due times: `load` × C throughout, or the recovery cell's phases (the warm-up at the first phase's rate). */
function schedule (load: number): number[] {
  const phases = RECOVERY ? PHASES.map(([at, x]) => [at === 0 ? 0 : WARMUP_MS + at, x] as const) : [[0, load] as const]
  const times: number[] = []
  phases.forEach(([from, x], k) => {
    const to = k + 1 < phases.length ? phases[k + 1]![0] : WARMUP_MS + MEASURE_MS
    for (let t = from; t < to; t += 1000 / (x * C)) times.push(t)
  })
  return times
}

async function simulate (policy: Policy, load: number): Promise<Result> {
  let now = 0
  const probe = new DelayProbe({ codel: codelOptions(), clock: () => now, utilization: undefined })
  let counter = 0
  const firsts = schedule(load)
  const total = firsts.length
  // Every attempt, first or retry: its due time and number (1: the first).
  const due: number[] = []
  const attempt: number[] = []
  const scheduled = (i: number): number => due[i]!
  const perSecond = Array.from({ length: Math.ceil(MEASURE_MS / 1000) }, () => ({ sent: 0, retries: 0, ok: 0 }))
  const second = (i: number): { sent: number, retries: number, ok: number } => perSecond[Math.floor((due[i]! - WARMUP_MS) / 1000)]!
  const addAttempt = (t: number, n: number): number => {
    due.push(t)
    attempt.push(n)
    const i = due.length - 1
    if (inWindow(i)) { second(i).sent++; if (n > 1) second(i).retries++ }
    return i
  }
  // A 503 or a timeout: the client sends it again at once, up to RETRIES times.
  const retry = (i: number, t: number): void => { if (attempt[i]! <= RETRIES && t < WARMUP_MS + MEASURE_MS) clientQueue.push(addAttempt(t, attempt[i]! + 1)) }
  let next = 0 // next first attempt to schedule
  let free = SOCKETS
  // The simulation has no real connections: one object per socket, never in the accept queue's marks.
  const sockets = Array.from({ length: SOCKETS }, () => ({}))
  const clientQueue: number[] = []
  let head = 0
  // Requests at the server: [request, arrival time, new connection?]
  let inbox: Array<[number, number, boolean]> = []
  const latencies: number[] = []
  const count = { ok: 0, shed: 0, timeouts: 0, measured: 0 }
  const inWindow = (i: number): boolean => scheduled(i) >= WARMUP_MS && scheduled(i) < WARMUP_MS + MEASURE_MS
  const abandoned = new Set<number>()
  let fresh = 0 // connections replaced after a timeout: their next request pays an accept
  let dueAt = probe.periodMs
  // Requests scheduled by `t` go out on free connections, or queue.
  const admit = (t: number): void => {
    while (next < total && firsts[next]! <= t) clientQueue.push(addAttempt(firsts[next++]!, 1))
    while (head < clientQueue.length) {
      const i = clientQueue[head]!
      if (scheduled(i) + DEADLINE_MS <= t) { head++; if (inWindow(i)) { count.measured++; count.timeouts++ } retry(i, t); continue }
      if (free === 0) break
      free--; head++
      inbox.push([i, Math.max(t, scheduled(i)), fresh > 0])
      if (fresh > 0) fresh--
    }
  }
  // Outstanding requests whose deadline passed: the client gives up, the connection is replaced.
  const expire = (t: number): void => {
    for (const [i] of inbox) {
      if (!abandoned.has(i) && scheduled(i) + DEADLINE_MS <= t) {
        abandoned.add(i); free++; fresh++
        if (inWindow(i)) { count.measured++; count.timeouts++ }
        retry(i, t)
      }
    }
  }
  while (next < total || head < clientQueue.length || inbox.length > 0) {
    admit(now)
    // The timers phase: the probe, when due.
    if (now >= dueAt) {
      probe.tick()
      dueAt = now + probe.periodMs
    }
    const ready = inbox.filter(([, at]) => at <= now).sort((a, b) => a[1] - b[1])
    if (ready.length === 0) {
      const arrivals = inbox.map(([, at]) => at)
      const nextAt = Math.min(next < total ? firsts[next]! : Infinity, dueAt, ...arrivals)
      now = Math.max(now, nextAt === Infinity ? now + 1 : nextAt)
      continue
    }
    inbox = inbox.filter((entry) => !ready.includes(entry))
    for (const [i, , accept] of ready) {
      now += PARSE_MS + (accept ? ACCEPT_MS : 0)
      const gone = abandoned.has(i)
      let shed = false
      if (policy === 'cut') shed = probe.sheds(sockets[i % sockets.length]!)
      else if (policy === 'share') { shed = codelSheds(probe.codel, counter); counter = (counter + 1) % 1024 }
      now += shed ? REFUSE_MS : SERVE_MS
      if (gone) { abandoned.delete(i); continue }
      free++
      const latency = now - scheduled(i)
      if (shed || latency > DEADLINE_MS) retry(i, now)
      if (!inWindow(i)) continue
      count.measured++
      if (latency > DEADLINE_MS) { count.timeouts++; continue }
      if (shed) count.shed++
      else { count.ok++; latencies.push(latency); second(i).ok++ }
    }
    expire(now)
    // The check phase: the turn is over.
    await new Promise((resolve) => { setImmediate(resolve) })
  }
  latencies.sort((a, b) => a - b)
  return {
    goodput: count.ok / (MEASURE_MS / 1000) / C,
    p99: latencies.length === 0 ? NaN : latencies[Math.floor(latencies.length * 0.99)]!,
    shed: count.shed / count.measured,
    timeouts: count.timeouts / count.measured,
    seconds: perSecond.map((x) => ({ goodput: x.ok / C, retryShare: x.sent === 0 ? 0 : x.retries / x.sent }))
  }
}

const pct = (x: number): string => `${(100 * x).toFixed(0)} %`
console.log(`C = ${C.toFixed(0)}/s; parse ${PARSE_MS} ms, serve ${SERVE_MS} ms, refuse ${REFUSE_MS} ms, accept ${ACCEPT_MS} ms; ${SOCKETS} connections, deadline ${DEADLINE_MS} ms\n`)
const policies = (env.SIM_POLICIES ?? (RECOVERY ? 'none,cut' : 'none,share,cut')).split(',') as Policy[]
if (RECOVERY) {
  const runs = await Promise.all(policies.map(async (policy) => ({ policy, r: await simulate(policy, 0) })))
  console.log('Recovery: 0.8 C, 4 C from 3 s to 13 s, 0.8 C; retries at once on a 503 or a timeout, up to 3. Per second: goodput / C · retries\' share\n')
  console.log(`| s | ${policies.join(' | ')} |\n| --- | ${policies.map(() => '---').join(' | ')} |`)
  runs[0]!.r.seconds.forEach((_, s) => { console.log(`| ${s} | ${runs.map(({ r }) => `${r.seconds[s]!.goodput.toFixed(2)} · ${pct(r.seconds[s]!.retryShare)}`).join(' | ')} |`) })
} else {
  console.log('| policy | offered | goodput / C | p99 200 (ms) | 503 | timeouts |\n| --- | --- | --- | --- | --- | --- |')
  for (const policy of policies) {
    for (const load of (env.SIM_LOADS ?? '0.5,1,2,4,8').split(',').map(Number)) {
      const r = await simulate(policy, load)
      console.log(`| ${policy} | ${load} C | ${r.goodput.toFixed(2)} | ${r.p99.toFixed(1)} | ${pct(r.shed)} | ${pct(r.timeouts)} |`)
    }
  }
}
