// A TCP proxy on a free loopback port in front of a Redis server, which can stop passing the
// server's replies on (`stall()`) and pass them again (`release()`): a client behind it sees a
// server that takes as long as the test wants — a timeout without a timed pause of any server,
// and without touching the shared one. No tests here.
import { connect, createServer, type Socket } from 'node:net'

export interface StallProxy {
  readonly port: number
  readonly url: string
  /** Replies are held from now on (the commands still reach the server and run). */
  stall (): void
  /** The held replies, and later ones, flow to the clients again. */
  release (): void
  close (): Promise<void>
}

export async function stallProxy (host: string, port: number): Promise<StallProxy> {
  const upstreams = new Set<Socket>()
  const sockets = new Set<Socket>()
  let stalled = false
  const server = createServer((client) => {
    const upstream = connect(port, host)
    upstreams.add(upstream)
    sockets.add(client)
    if (stalled) upstream.pause()
    client.on('data', (chunk) => upstream.write(chunk))
    upstream.on('data', (chunk) => client.write(chunk))
    const end = (): void => {
      client.destroy()
      upstream.destroy()
      upstreams.delete(upstream)
      sockets.delete(client)
    }
    client.on('error', end).on('close', end)
    upstream.on('error', end).on('close', end)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  const own = typeof address === 'object' && address !== null ? address.port : 0
  return {
    port: own,
    url: `redis://127.0.0.1:${own}`,
    stall () {
      stalled = true
      for (const upstream of upstreams) upstream.pause()
    },
    release () {
      stalled = false
      for (const upstream of upstreams) upstream.resume()
    },
    close () {
      for (const socket of [...sockets, ...upstreams]) socket.destroy()
      return new Promise((resolve) => server.close(() => resolve()))
    }
  }
}
