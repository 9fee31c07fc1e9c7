import { request as httpRequest } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { FastifyInstance } from 'fastify'

/** Listens on an ephemeral loopback port and returns it. */
export async function listen (app: FastifyInstance): Promise<number> {
  await app.listen({ port: 0, host: '127.0.0.1' })
  return (app.server.address() as AddressInfo).port
}

export interface Answer {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: string
}

/** A GET from a real client; resolves with the whole answer. */
export function get (port: number, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, headers, agent: false }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => { body += chunk })
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, headers: res.headers, body }) })
    })
    req.on('error', reject)
    req.end()
  })
}

/** Sends a GET and destroys the connection once `until` resolves, without reading an answer. */
export function getThenAbort (port: number, path: string, until: Promise<unknown>): Promise<void> {
  return new Promise((resolve) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, agent: false })
    req.on('error', () => { /* the abort is the point */ })
    req.end()
    void until.then(() => { req.destroy(); resolve() })
  })
}

/** A promise with its resolve function, for a test to let a handler go on. */
export function deferred<T = void> (): { promise: Promise<T>, resolve: (value: T) => void } {
  let resolve!: (value: T) => void
  const promise = new Promise<T>((r) => { resolve = r })
  return { promise, resolve }
}

/**
 * Polls `check` every few ms until it is true or `ms` pass. The bound is no claim of speed, only
 * when to give up: a busy machine (CI beside other work) may take seconds for what takes ms here.
 */
export async function eventually (check: () => boolean, ms = 10_000): Promise<boolean> {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (check()) return true
    await new Promise((r) => setTimeout(r, 5))
  }
  return check()
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))

/** What a helper needs of a tap test: somewhere to register its clean-up. */
export interface Teardown { teardown: (fn: () => unknown) => void }
