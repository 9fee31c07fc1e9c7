import { BlockList, isIP } from 'node:net'
import type { Server } from 'node:net'
import { AdmissionOptionError } from '../validation/errors.js'

// 127.0.0.0/8 and ::1, and IPv4 loopback written as IPv6 (`::ffff:127.0.0.1`).
const LOOPBACK = new BlockList()
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4')
LOOPBACK.addAddress('::1', 'ipv6')
LOOPBACK.addSubnet('::ffff:127.0.0.0', 104, 'ipv6')

/** Whether an IP address is a loopback address; a name or anything else is not. */
export function isLoopback (address: string): boolean {
  const family = isIP(address)
  return family !== 0 && LOOPBACK.check(address, family === 4 ? 'ipv4' : 'ipv6')
}

/**
 * The host a call of `server.listen` binds, as Node reads its arguments: an options object's
 * `host` (Fastify's way), or the host after a port (`listen(3000, '127.0.0.1')`). Undefined when it
 * binds every address (no host), a pipe or a handle: none of them is loopback alone.
 */
export function listenHost (args: readonly unknown[]): string | undefined {
  const [first, second] = args
  if (typeof first === 'object' && first !== null) {
    const options = first as { host?: unknown, path?: unknown, fd?: unknown, handle?: unknown, _handle?: unknown }
    if (options.path != null || options.fd != null || options.handle != null || options._handle != null) return undefined
    return typeof options.host === 'string' ? options.host : undefined
  }
  const port = typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))
  return port && typeof second === 'string' ? second : undefined
}

/** Whether a host binds loopback alone: a loopback address, or `localhost` (Fastify's default, which it binds as 127.0.0.1 and ::1). */
export function loopbackHost (host: string | undefined): boolean {
  return host !== undefined && (host.toLowerCase() === 'localhost' || isLoopback(host))
}

/**
 * The live page without `auth` is for whoever can reach loopback: a `listen()` on any other
 * address fails before anything is bound, with the error on the server's `error` event, which
 * Fastify's `listen()` rejects with. The check is on `server.listen`, where every way to start the
 * server passes (Fastify's `listen()`, or the server's own); Fastify's `onListen` runs after the
 * bind, and its errors are only logged.
 */
export function requireLoopbackListen (server: Server, path: string): void {
  const listen = server.listen
  server.listen = function loopbackListen (this: Server, ...args: unknown[]): Server {
    const host = listenHost(args)
    if (loopbackHost(host)) return (listen as (...a: unknown[]) => Server).apply(this, args)
    const where = host === undefined ? 'every address, a pipe or a handle (no host given)' : JSON.stringify(host)
    const error = new AdmissionOptionError('live.auth', `a function (request, reply) => boolean when the server listens beyond loopback (listen() was asked for ${where}; the live page at ${path} shows the gate's traffic): give live.auth, or listen on 127.0.0.1, ::1 or localhost only`, undefined, { got: 'no auth function' })
    process.nextTick(() => { this.emit('error', error) })
    return this
  } as Server['listen']
}
