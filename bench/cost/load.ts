// The load of the cost benchmark: raw keep-alive HTTP/1.1 over `node:net`, in the server's own
// process, so callgrind counts the user-space instructions of both. No HTTP client library: the
// load's own cost is a few prebuilt writes and a tiny response parser, the same for every variant.
import { connect, type Socket } from 'node:net'
import { getPriority } from 'node:os'

/** The request header that carries the client identity. */
export const CLIENT_HEADER = 'x-client'

export interface LoadSpec {
  port: number
  connections: number
  /** Distinct client ids, used in turn (`x-client: c0` … `c<clients-1>`). */
  clients: number
  requests: number
  /** `os.getPriority()` (callgrind's dump trigger) before the first request and after every `markEvery` responses. */
  markEvery: number
  /**
   * Connections from this many loopback addresses (127.0.1.1, 127.0.1.2 …), one connection each
   * (`connections` is this then): `request.ip` tells that many clients apart. Default: all from 127.0.0.1.
   */
  sources?: number
}

export interface LoadResult {
  /** Status counts of each window of `markEvery` responses, in order (window i ends at mark i + 1). */
  windows: Array<Record<string, number>>
  marks: number
  seconds: number
}

/** Ends the process's current callgrind dump (`--dump-before=uv_os_getpriority`). */
export function mark (): void { getPriority() }

const HEADER_END = '\r\n\r\n'

/** The c-th source address of a load from many clients: 127.0.1.1 onwards (the loopback range). */
function sourceAddress (c: number): string {
  return `127.0.${1 + Math.floor(c / 254)}.${1 + (c % 254)}`
}

export function runLoad (spec: LoadSpec): Promise<LoadResult> {
  const { port, connections, clients, requests, markEvery } = spec
  if (requests % markEvery !== 0) throw new Error(`requests (${requests}) must be a multiple of markEvery (${markEvery})`)
  const wire = Array.from({ length: clients }, (_, i) => Buffer.from(`GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n${CLIENT_HEADER}: c${i}\r\n\r\n`, 'latin1'))
  const windows: Array<Record<string, number>> = []
  let window: Record<string, number> = {}
  let sent = 0
  let done = 0
  let marks = 0
  const t0 = performance.now()

  return new Promise((resolve, reject) => {
    const sockets: Socket[] = []
    const send = (socket: Socket): void => { socket.write(wire[sent++ % clients]!) }
    const finish = (): void => {
      for (const s of sockets) s.destroy()
      resolve({ windows, marks, seconds: (performance.now() - t0) / 1000 })
    }
    const onResponse = (socket: Socket, status: string): void => {
      window[status] = (window[status] ?? 0) + 1
      if (++done % markEvery === 0) {
        mark(); marks++
        windows.push(window); window = {}
      }
      if (done === requests) { finish(); return }
      if (sent < requests) send(socket)
    }
    const open = (c: number): Socket => {
      const socket = connect({ port, host: '127.0.0.1', noDelay: true, ...(spec.sources === undefined ? {} : { localAddress: sourceAddress(c) }) })
      let buffered = ''
      socket.on('data', (chunk: Buffer) => {
        buffered += chunk.toString('latin1')
        for (;;) {
          const end = buffered.indexOf(HEADER_END)
          if (end < 0) return
          let at = buffered.indexOf('ontent-length: ')
          if (at < 0) at = buffered.indexOf('ontent-Length: ')
          if (at < 0 || at > end) { socket.destroy(); reject(new Error(`response without content-length: ${JSON.stringify(buffered.slice(0, end))}`)); return }
          const length = parseInt(buffered.slice(at + 15, buffered.indexOf('\r\n', at)), 10)
          const size = end + 4 + length
          if (buffered.length < size) return
          const status = buffered.slice(9, 12)
          buffered = buffered.length === size ? '' : buffered.slice(size)
          onResponse(socket, status)
        }
      })
      socket.on('error', (error) => { reject(error) })
      socket.on('close', () => { if (done < requests) reject(new Error(`connection closed after ${done} of ${requests} responses`)) })
      return socket
    }
    for (let c = 0; c < connections; c++) sockets.push(open(c))
    // The first mark before the first request: the hot path is marked from its first run (a mark
    // first taken late would deoptimise it), and dump 1 holds only the start-up.
    mark(); marks++
    for (const socket of sockets) if (sent < requests) send(socket)
  })
}
