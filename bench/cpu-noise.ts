// Time per core from /proc/stat (Linux): to tell whether the server's core was saturated and how
// much CPU something other than the benchmark's own processes took during a run.
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'

/** Seconds one core spent: in processes (user, nice, system), in interrupts (irq, softirq: loopback traffic lands there), idle. */
export interface CoreTime { busy: number, irq: number, idle: number }

let ticksPerSecond = 0

export function coreTimes (): CoreTime[] | undefined {
  try {
    if (ticksPerSecond === 0) ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100
    const cores: CoreTime[] = []
    for (const line of readFileSync('/proc/stat', 'utf8').split('\n')) {
      const m = /^cpu(\d+) (\d+) (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)/.exec(line)
      if (m === null) continue
      const [user, nice, system, idle, iowait, irq, softirq] = m.slice(2).map((v) => Number(v) / ticksPerSecond) as [number, number, number, number, number, number, number]
      cores[Number(m[1])] = { busy: user + nice + system, irq: irq + softirq, idle: idle + iowait }
    }
    return cores
  } catch {
    return undefined
  }
}

export function timesBetween (before: CoreTime[] | undefined, after: CoreTime[] | undefined): CoreTime[] | undefined {
  if (before === undefined || after === undefined) return undefined
  return after.map((a, i) => ({ busy: a.busy - (before[i]?.busy ?? 0), irq: a.irq - (before[i]?.irq ?? 0), idle: a.idle - (before[i]?.idle ?? 0) }))
}

/** Waits until every core is nearly idle (at most `maxWaitMs`); returns the ms waited. */
export async function waitForQuiet (maxBusyShare: number, maxWaitMs: number): Promise<number> {
  const t0 = performance.now()
  for (;;) {
    const a = coreTimes()
    await new Promise((resolve) => setTimeout(resolve, 250))
    const d = timesBetween(a, coreTimes())
    const waited = performance.now() - t0
    if (d === undefined || d.every((c) => c.busy / 0.25 <= maxBusyShare) || waited >= maxWaitMs) return waited
  }
}
