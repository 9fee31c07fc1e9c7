import type { FastifyReply, FastifyRequest } from 'fastify'
import { AdmissionOptionError } from '../validation/errors.js'
import { exactObject, optionalFunction } from '../validation/checks.js'

/**
 * Who may see the live page and its data: `true` lets the request through; anything else refuses
 * it (403, or the 4xx the function set on the reply, as a 401 with `WWW-Authenticate` for a
 * browser's login prompt), with no data. A throw or a rejection is the application's error (500).
 */
export type LiveAuth = (request: FastifyRequest, reply: FastifyReply) => boolean | Promise<boolean>

/** `live`: one HTML page of the gate's counters, updated every second, and the JSON it reads. */
export interface LiveOptions {
  /** Where the page is served (default `/admission/live`); its data at `<path>/data`. One path: no `:` parameter, no `*` wildcard. */
  path?: string
  /**
   * Who may see the page. Without it the server must listen on loopback only (127.0.0.0/8, ::1,
   * `localhost`): `listen()` on any other address fails with an `AdmissionOptionError` naming `live.auth`.
   */
  auth?: LiveAuth
}

export interface LiveSettings {
  /** The page's path; the data's is `${path}/data`. */
  readonly path: string
  readonly auth: LiveAuth | undefined
}

export const DEFAULT_LIVE_PATH = '/admission/live'

const complain = AdmissionOptionError.complain
const SHAPE = { keys: ['path', 'auth'], expected: 'true, false, or an object { path?, auth? }', nullPrototype: true, options: true }
// One path: a pattern would answer every path it matches, a trailing `/` would give the data `//data`,
// and `?` or `#` would never reach a route.
const ONE_PATH = /^(?:\/[^/:*?#\s]+)+$/
const PATH_TEXT = 'a path of one or more segments, each `/` and a name without `:`, `*`, `?`, `#` or spaces (`/admission/live`)'

/** The `live` option: off (the default) or the page's settings. */
export function liveOption (value: unknown): LiveSettings | undefined {
  if (value === undefined || value === false) return undefined
  if (value === true) return Object.freeze({ path: DEFAULT_LIVE_PATH, auth: undefined })
  const input = exactObject(complain, 'live', value, SHAPE)
  const path = input.path === undefined ? DEFAULT_LIVE_PATH : input.path
  if (typeof path !== 'string' || !ONE_PATH.test(path)) throw new AdmissionOptionError('live.path', PATH_TEXT, path)
  const auth = optionalFunction<LiveAuth>(complain, 'live.auth', input.auth, 'a function (request, reply) => boolean | Promise<boolean>')
  return Object.freeze({ path, auth })
}
