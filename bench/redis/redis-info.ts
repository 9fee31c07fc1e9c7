// Redis's own counters, read with INFO, and the difference between two readings. A difference,
// not CONFIG RESETSTAT, so that two readers (the decision child and the HTTP runner) can never
// reset each other's window, and the INFO call itself (one command) stays out of every ratio.

/** What a client needs to read INFO: ioredis's `info(section)`. */
export interface InfoReader { info (section: string): Promise<string> }

/** One command's counters: calls and microseconds of the main thread inside it. */
export interface CommandCounters { calls: number, usec: number }

export interface RedisCounters {
  /** `used_cpu_sys + used_cpu_user`: the whole process, network work included (seconds). */
  cpuSeconds: number
  /**
   * `cmdstat_<name>` of every command. Commands a script calls (`TIME`, `GET`, `SET`, `INCR` …)
   * are counted under their own names as well as inside the script's `evalsha` time.
   */
  commands: Record<string, CommandCounters>
}

export async function readCounters (client: InfoReader): Promise<RedisCounters> {
  // One INFO call for both sections: two would put one INFO between the two readings.
  const text = await client.info('everything')
  const field = (name: string): number => {
    const match = new RegExp(`^${name}:([\\d.]+)\\r?$`, 'm').exec(text)
    if (match === null) throw new Error(`INFO has no ${name}`)
    return Number(match[1])
  }
  const commands: Record<string, CommandCounters> = {}
  for (const match of text.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+),/gm)) {
    commands[match[1]!] = { calls: Number(match[2]), usec: Number(match[3]) }
  }
  return { cpuSeconds: field('used_cpu_sys') + field('used_cpu_user'), commands }
}

/** `after - before`, command by command (a command first seen after `before` counts from zero). */
export function countersBetween (before: RedisCounters, after: RedisCounters): RedisCounters {
  const commands: Record<string, CommandCounters> = {}
  for (const [name, a] of Object.entries(after.commands)) {
    const b = before.commands[name] ?? { calls: 0, usec: 0 }
    if (a.calls > b.calls) commands[name] = { calls: a.calls - b.calls, usec: a.usec - b.usec }
  }
  return { cpuSeconds: after.cpuSeconds - before.cpuSeconds, commands }
}

/** The script calls of a window: EVALSHA, plus EVAL (a NOSCRIPT fallback, or a first load). */
export function scriptCounters (window: RedisCounters): CommandCounters {
  const sha = window.commands.evalsha ?? { calls: 0, usec: 0 }
  const source = window.commands.eval ?? { calls: 0, usec: 0 }
  return { calls: sha.calls + source.calls, usec: sha.usec + source.usec }
}

/** The commands a script ran inside it (all but the script calls and INFO), per script call. */
export function innerCommands (window: RedisCounters): Record<string, CommandCounters> {
  const inner: Record<string, CommandCounters> = {}
  for (const [name, c] of Object.entries(window.commands)) {
    if (name !== 'evalsha' && name !== 'eval' && name !== 'info') inner[name] = c
  }
  return inner
}
