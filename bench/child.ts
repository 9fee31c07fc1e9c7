// Pinned child processes with deadlines; every child started here is killed by `killAll`.
import { type ChildProcess, spawn } from 'node:child_process'

const live = new Set<ChildProcess>()

export interface Pinned {
  core: number
  script: string
  args?: string[]
  nodeFlags?: string[]
  /** Keep an IPC channel (servers). */
  ipc?: boolean
}

export function startPinned (p: Pinned): ChildProcess {
  const argv = ['-c', String(p.core), process.execPath, ...(p.nodeFlags ?? []), '--import', 'tsx', p.script, ...(p.args ?? [])]
  const child = spawn('taskset', argv, {
    stdio: ['ignore', 'pipe', 'inherit', ...(p.ipc === true ? ['ipc' as const] : [])]
  })
  live.add(child)
  child.once('exit', () => { live.delete(child) })
  return child
}

/** Runs a pinned child to its end and parses the last line it printed as JSON. */
export function runPinned<T> (p: Pinned, deadlineMs: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = startPinned(p)
    let out = ''
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => { out += chunk })
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`${p.script} ${p.args?.join(' ') ?? ''}: no answer within ${deadlineMs} ms`)) }, deadlineMs)
    child.once('error', (error) => { clearTimeout(timer); reject(error) })
    child.once('exit', (code, signal) => {
      clearTimeout(timer)
      const last = out.trim().split('\n').pop() ?? ''
      if (code !== 0) { reject(new Error(`${p.script} exited with ${code ?? signal}: ${last}`)); return }
      try { resolve(JSON.parse(last) as T) } catch { reject(new Error(`${p.script}: not JSON: ${last}`)) }
    })
  })
}

/** Waits for a message from a child's IPC channel that satisfies `pick`. */
export function nextMessage<T> (child: ChildProcess, pick: (m: unknown) => T | undefined, deadlineMs: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const done = (): void => { clearTimeout(timer); child.off('message', onMessage); child.off('exit', onExit) }
    const onMessage = (m: unknown): void => { const v = pick(m); if (v !== undefined) { done(); resolve(v) } }
    const onExit = (code: number | null): void => { done(); reject(new Error(`child ${child.pid} exited (${code}) before answering`)) }
    const timer = setTimeout(() => { done(); reject(new Error(`child ${child.pid}: no message within ${deadlineMs} ms`)) }, deadlineMs)
    child.on('message', onMessage)
    child.once('exit', onExit)
  })
}

export function killAll (): void {
  for (const child of live) child.kill('SIGKILL')
  live.clear()
}
