import { createServer, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'

/** One request as the server saw it: when it arrived (`Date.now()`, the client's clock too), its path and `Retry-Attempt`. */
export interface Arrival {
  readonly at: number
  readonly path: string
  readonly method: string
  readonly attempt: string | undefined
  /** When the server wrote its answer to this request (set for every answer). */
  answeredAt: number
  status: number
}

export interface Reply {
  readonly status: number
  readonly headers?: OutgoingHttpHeaders
  readonly body?: string
}

export interface ScriptedServer {
  readonly origin: string
  readonly arrivals: Arrival[]
  close: () => Promise<void>
}

/**
 * A plain `node:http` server (no Fastify, no plugin) whose answers a test scripts: `answer` gets
 * each request, its number (0 first) and what arrived before, and says the status and fields.
 * Every arrival is recorded with the time it arrived and the time it was answered, read on the
 * same clock the client uses, so a test asserts "sent no earlier than the server said" from them.
 */
export async function scriptedServer (answer: (request: IncomingMessage, n: number, arrivals: readonly Arrival[]) => Reply): Promise<ScriptedServer> {
  const arrivals: Arrival[] = []
  const server = createServer((request, response) => {
    const arrival: Arrival = { at: Date.now(), path: request.url ?? '', method: request.method ?? '', attempt: request.headers['retry-attempt'] as string | undefined, answeredAt: 0, status: 0 }
    const before = [...arrivals]
    arrivals.push(arrival)
    request.resume()
    request.on('end', () => {
      const reply = answer(request, before.length, before)
      arrival.status = reply.status
      arrival.answeredAt = Date.now()
      response.writeHead(reply.status, reply.headers)
      response.end(reply.body ?? (reply.status < 400 ? 'ok' : 'refused'))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    origin: `http://127.0.0.1:${port}`,
    arrivals,
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => { resolve() }))
    }
  }
}
