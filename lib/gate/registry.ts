import type { BackendLimiter } from '../rates/backend.js'
import { RatesInvalidArgumentError } from '../rates/errors.js'

/**
 * A quota's registry of client states (for a token bucket, the core's bucket values): what the backend
 * stores for a client, by the client's key. `key` is what the `key` option returns for the
 * client, or its address when there is no `key` option (IPv6 grouped as the gate groups it).
 */
export interface AdmissionRegistry {
  /**
   * The client's state, or undefined when it has none (it is at full capacity). For a token
   * bucket, the core's `Bucket` `{ tokens, last }`: `tokens` in 1/`windowMs` of a token (divide by
   * `windowMs` for tokens), `last` the backend's clock in ms (memory: this process's monotonic
   * epoch ms; Redis: the server's time). Other algorithms: their kernel's state (see `fastify-admission/core`).
   */
  get (key: string): Promise<unknown>
  /** Forgets the client's state, so it starts fresh (e.g. after a successful login); true when it had one. */
  delete (key: string): Promise<boolean>
}

/**
 * The plugin's decorated, per-instance registry: a quota's client states by client key, read and
 * forgotten through the backend that holds them (`app.admission.registry`, `registryOf(route)`).
 * `keyOf` turns the application's key into the quota's identity, as the gate does.
 */
export function registryOver (limiter: BackendLimiter | undefined, keyOf: (key: string) => string): AdmissionRegistry {
  return Object.freeze({
    get: async (key: string) => limiter === undefined ? undefined : await limiter.state(keyOf(checkedKey(key))),
    delete: async (key: string) => limiter === undefined ? false : await limiter.delete(keyOf(checkedKey(key)))
  })
}

function checkedKey (key: unknown): string {
  if (typeof key !== 'string') throw new RatesInvalidArgumentError('key', 'a client key (a string)', key)
  return key
}

