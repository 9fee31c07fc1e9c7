import { STATUS_CODES } from 'node:http'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { AdmissionOptionError } from '../validation/errors.js'
import { UNGATED } from '../pressure/status-route.js'
import { LimitHistory } from './history.js'
import { isLoopback, requireLoopbackListen } from './loopback.js'
import type { LiveAuth, LiveSettings } from './options.js'
import { PAGE_CSP, PAGE_HTML } from './page.js'
import { snapshotOf, type LiveStats } from './snapshot.js'

/** What the page reads of its registration. */
export interface LiveSource {
  stats (): LiveStats
  /** The global in-flight limit now (0 or false: none). */
  limit (): number | false
  /** The requests holding a slot of the global gate now. */
  inFlight (): number
}

/** How often the limit is sampled (the page polls as often). */
export const SAMPLE_MS = 1000

/**
 * The live page (`live`): `GET <path>`, one HTML document, and `GET <path>/data`, the JSON it
 * polls. Neither is gated or counted by any registration (`UNGATED`): the page must answer while
 * the gate sheds, and its polling must not be traffic it reports. The limit's last minute is
 * sampled once a second by a timer that exists only while the page is on (unref'd: it keeps no
 * process alive; cleared at close), so that a page opened now draws the minute before it. Nothing
 * is added to any other route: with the page on, a gated request runs exactly what it runs without.
 */
export function exposeLivePage (fastify: FastifyInstance, settings: LiveSettings, source: LiveSource): void {
  const history = new LimitHistory()
  const allowed = admits(settings.auth)
  const config: Record<string | symbol, unknown> = { [UNGATED]: true }
  const serve = (url: string, handler: (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>, quiet: boolean): void => {
    try {
      // The data is polled every second by each open page: its request lines are logged only at warn.
      fastify.route({ method: 'GET', url, config, handler, ...(quiet ? { logLevel: 'warn' } : {}) })
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'FST_ERR_DUPLICATED_ROUTE') throw error
      const taken = new AdmissionOptionError('live.path', `a path no route of the application has (GET ${url} is already declared: give the live page another, as in live: { path: '/ops/admission' }, or remove the application's route)`, settings.path)
      Object.defineProperty(taken, 'cause', { value: error, configurable: true, writable: true })
      throw taken
    }
  }
  serve(settings.path, async function admissionLivePage (request, reply) {
    if (!await allowed(request, reply)) return refuse(reply)
    reply.headers({ 'content-type': 'text/html; charset=utf-8', 'content-security-policy': PAGE_CSP, 'x-content-type-options': 'nosniff', 'cache-control': 'no-store', 'referrer-policy': 'no-referrer' })
    return PAGE_HTML
  }, false)
  serve(`${settings.path}/data`, async function admissionLiveData (request, reply) {
    if (!await allowed(request, reply)) return refuse(reply)
    reply.header('cache-control', 'no-store')
    return snapshotOf(source.stats(), history.samples(), Date.now())
  }, true)
  // Only once both routes are declared: a registration that failed leaves no timer and no check.
  const sample = (): void => {
    const limit = source.limit()
    history.add({ time: Date.now(), limit: limit === false || limit === 0 ? null : limit, inFlight: source.inFlight() })
  }
  sample()
  const timer = setInterval(sample, SAMPLE_MS).unref()
  fastify.addHook('onClose', (_instance, done) => { clearInterval(timer); done() })
  if (settings.auth === undefined) requireLoopbackListen(fastify.server, settings.path)
}

/**
 * Whether a request may see the page: `auth`'s `true`; without `auth`, a request that came in on a
 * loopback address (the listen check refuses every other bind, and this holds for a server started
 * some other way). A request with no socket address (`inject`) comes from the process itself.
 */
function admits (auth: LiveAuth | undefined): (request: FastifyRequest, reply: FastifyReply) => Promise<boolean> {
  if (auth !== undefined) return async (request, reply) => await auth(request, reply) === true
  return async (request, reply) => {
    const local = request.socket.localAddress
    if (local === undefined || isLoopback(local)) return true
    reply.code(403)
    return false
  }
}

/** A refusal with no data: the status `auth` set when it set a 4xx (a 401 with its `WWW-Authenticate`), else 403. */
function refuse (reply: FastifyReply): FastifyReply {
  if (reply.sent) return reply
  const status = reply.statusCode >= 400 && reply.statusCode < 500 ? reply.statusCode : 403
  reply.headers({ 'cache-control': 'no-store' })
  return reply.code(status).type('text/plain; charset=utf-8').send(`${status} ${STATUS_CODES[status]!}\n`)
}
