// The Redis clients the backend accepts, and the one way it calls them. Two calling conventions
// exist for scripts; the client's is recognised once, at construction, by its shape alone (no
// client package is loaded by this library, at run time or for its types):
//
// - ioredis, and iovalkey (its fork): `evalsha(sha, numKeys, ...keysAndArgs)` and
//   `eval(script, numKeys, ...keysAndArgs)`, on `Redis` and `Cluster` alike;
// - node-redis (`redis`, `@redis/client`): `evalSha(sha, { keys, arguments })` and
//   `eval(script, { keys, arguments })`, on `createClient()` and `createCluster()` alike (the
//   cluster client routes by the first key).
//
// Both reject with an error whose message starts with `NOSCRIPT` when the server does not have the
// script; the backend's fallback to `EVAL` needs nothing more.

/**
 * An ioredis or iovalkey client (`Redis` or `Cluster`): `EVALSHA` and `EVAL` with the number of
 * keys, then the keys and the arguments, returning promises.
 */
export interface RedisScriptClient {
  evalsha (sha: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>
  eval (script: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>
}

/** The second argument of node-redis's `evalSha()` and `eval()`. */
export interface NodeRedisScriptOptions {
  keys: string[]
  arguments: string[]
}

/**
 * A node-redis client (`createClient()` or `createCluster()` from `redis` or `@redis/client`):
 * `evalSha` and `eval` taking the keys and the arguments in an object, returning promises. Not
 * its legacy (callback) mode.
 */
export interface NodeRedisScriptClient {
  evalSha (sha: string, options: NodeRedisScriptOptions): Promise<unknown>
  eval (script: string, options: NodeRedisScriptOptions): Promise<unknown>
}

/** Any client `redisBackend({ client })` accepts. */
export type RedisBackendClient = RedisScriptClient | NodeRedisScriptClient

/** The calling convention of a client. */
export type RedisClientShape = 'ioredis' | 'node-redis'

/**
 * The one call the backend makes: a script by its SHA (`EVALSHA`) or by its source (`EVAL`), on
 * one key (a decision) or on several (a stack's, all in one hash slot). Always a promise: a client
 * that throws synchronously rejects it.
 */
export type ScriptCall = (by: 'sha' | 'source', script: string, keys: string | readonly string[], args: string[]) => Promise<unknown>

/**
 * The convention `client` follows, or undefined when it follows none. An object with both
 * `evalsha` and `evalSha` is taken as ioredis-shaped (as it always was; no real client has both).
 */
export function clientShape (client: unknown): RedisClientShape | undefined {
  if (typeof client !== 'object' || client === null) return undefined
  const methods = client as { evalsha?: unknown, evalSha?: unknown, eval?: unknown }
  if (typeof methods.eval !== 'function') return undefined
  if (typeof methods.evalsha === 'function') return 'ioredis'
  if (typeof methods.evalSha === 'function') return 'node-redis'
  return undefined
}

/** The backend's one call, made on `client` in its own convention. */
export function scriptCall (client: RedisBackendClient, shape: RedisClientShape): ScriptCall {
  // One key (a string) is the single decision's call, built as it always was: no array of keys.
  if (shape === 'ioredis') {
    const io = client as RedisScriptClient
    return (by, script, keys, args) => typeof keys === 'string'
      ? send(() => by === 'sha' ? io.evalsha(script, 1, keys, ...args) : io.eval(script, 1, keys, ...args))
      : send(() => by === 'sha' ? io.evalsha(script, keys.length, ...keys, ...args) : io.eval(script, keys.length, ...keys, ...args))
  }
  const node = client as NodeRedisScriptClient
  return (by, script, keys, args) => {
    const options = { keys: typeof keys === 'string' ? [keys] : [...keys], arguments: args }
    return send(() => by === 'sha' ? node.evalSha(script, options) : node.eval(script, options))
  }
}

function send (call: () => Promise<unknown>): Promise<unknown> {
  try {
    return Promise.resolve(call())
  } catch (error) {
    return Promise.reject(error)
  }
}
