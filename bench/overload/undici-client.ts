// The generator's second client: undici, as most Node services call each other. One `undici.Pool` of
// `connections` keep-alive connections, one request at a time on each (`pipelining: 1`), every other
// setting undici's default. The open loop stays the generator's (load.ts): it calls `send` at each
// request's due time and `abort` at its deadline; undici queues what finds no free connection in
// its own queue and opens connections as it sees fit, which is what this client is here to measure.
import { Pool } from 'undici'

export interface UndiciClient {
  /** Sends request `i`; `ended(i, status)` when its body has been read, `ended(i, undefined)` on an error or abort. */
  send: (i: number, path: string, headers: Record<string, string> | undefined) => void
  /** Aborts request `i` (its deadline passed). */
  abort: (i: number) => void
  /** Connections open now. */
  connected: () => number
  close: () => Promise<void>
}

export function undiciClient (port: number, connections: number, ended: (i: number, status: number | undefined) => void): UndiciClient {
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections, pipelining: 1 })
  const controllers = new Map<number, AbortController>()
  return {
    send: (i, path, headers) => {
      const controller = new AbortController()
      controllers.set(i, controller)
      const failed = (): void => { controllers.delete(i); ended(i, undefined) }
      pool.request({ path, method: 'GET', signal: controller.signal, ...(headers === undefined ? {} : { headers }) }).then(
        ({ statusCode, body }) => body.dump().then(() => { controllers.delete(i); ended(i, statusCode) }, failed),
        failed
      )
    },
    abort: (i) => {
      const controller = controllers.get(i)
      if (controller === undefined) return
      controllers.delete(i)
      controller.abort()
    },
    connected: () => pool.stats.connected,
    close: () => pool.destroy()
  }
}
