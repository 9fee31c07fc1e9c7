import t from 'tap'
import type { Dispatcher } from 'undici'
import { admissionRetry } from '../../lib/client/index.js'

// The interceptor's handler driven by a scripted `dispatch` (no socket): what the application's
// handler sees across attempts, aborts, pauses and failures, with the clock injected.

type Handler = Dispatcher.DispatchHandler
type Controller = Dispatcher.DispatchController

/** A connection's controller as undici hands one to a handler, recording what was asked of it. */
function connection (): Controller & { calls: string[] } {
  const calls: string[] = []
  let aborted: Error | null = null
  return {
    calls,
    get aborted () { return aborted !== null },
    get paused () { return calls.at(-1) === 'pause' },
    get reason () { return aborted },
    abort (reason: Error) { aborted = reason; calls.push('abort') },
    pause () { calls.push('pause') },
    resume () { calls.push('resume') }
  }
}

/** The application's handler, recording every call with the status, chunk or error. */
function recorder (): Handler & { seen: string[], controller?: Controller } {
  const seen: string[] = []
  const h: Handler & { seen: string[], controller?: Controller } = {
    seen,
    onRequestStart (controller) { h.controller = controller; seen.push('start') },
    onRequestUpgrade (_c, status) { seen.push(`upgrade ${status}`) },
    onResponseStart (_c, status) { seen.push(`response ${status}`) },
    onResponseData (_c, chunk) { seen.push(`data ${chunk.toString()}`) },
    onResponseEnd () { seen.push('end') },
    onResponseError (_c, error) { seen.push(`error ${error.message}`) }
  }
  return h
}

interface Sent { opts: Dispatcher.DispatchOptions, handler: Handler, controller: Controller & { calls: string[] } }

function scripted (): { dispatch: Dispatcher.Dispatch, sent: Sent[] } {
  const sent: Sent[] = []
  const dispatch = (opts: Dispatcher.DispatchOptions, handler: Handler): boolean => {
    const controller = connection()
    sent.push({ opts, handler, controller })
    handler.onRequestStart?.(controller, { attempt: sent.length })
    return true
  }
  return { dispatch, sent }
}

function respond (s: Sent, status: number, headers: Record<string, string> = {}, body = 'x'): void {
  s.handler.onResponseStart?.(s.controller, status, headers, '')
  s.handler.onResponseData?.(s.controller, Buffer.from(body))
  s.handler.onResponseEnd?.(s.controller, {})
}

const GET: Dispatcher.DispatchOptions = { origin: 'http://example.test', path: '/', method: 'GET' }

t.test('the application sees one start and the last response; the refusal\'s bytes are not shown', async (t) => {
  const { dispatch, sent } = scripted()
  const events: unknown[] = []
  const retry = admissionRetry({ baseDelayMs: 1, maxDelayMs: 1, random: () => 0, onRetry: (e) => { events.push(e) } })
  const app = recorder()
  t.equal(retry(dispatch)({ ...GET, origin: new URL('http://example.test/ignored') }, app), true)
  respond(sent[0]!, 503, {}, 'refused')
  await new Promise((resolve) => setTimeout(resolve, 5))
  t.equal(sent.length, 2)
  respond(sent[1]!, 200, {}, 'served')
  t.strictSame(app.seen, ['start', 'response 200', 'data served', 'end'])
  t.strictSame(sent.map((s) => (s.opts.headers as Record<string, string>)['retry-attempt']), ['1', '2'])
  t.match(events, [{ origin: 'http://example.test', method: 'GET', path: '/', statusCode: 503, attempt: 2, waitMs: 0, advertised: false }])
})

t.test('the request\'s controller: pause and resume reach the attempt on the wire; an abort, once', async (t) => {
  const { dispatch, sent } = scripted()
  const app = recorder()
  admissionRetry()(dispatch)(GET, app)
  const controller = app.controller!
  controller.pause()
  t.equal(controller.paused, true)
  controller.resume()
  t.equal(controller.paused, false)
  t.equal(controller.aborted, false)
  t.equal(controller.reason, null)
  controller.abort(new Error('gone'))
  controller.abort(new Error('again'))
  t.equal(controller.aborted, true)
  t.equal(controller.reason?.message, 'gone')
  t.strictSame(sent[0]!.controller.calls, ['pause', 'resume', 'abort'], 'one abort reaches the connection')
})

t.test('an abort while waiting between attempts ends the wait: no attempt is sent, the application gets the reason', async (t) => {
  const { dispatch, sent } = scripted()
  const app = recorder()
  const retry = admissionRetry()
  retry(dispatch)(GET, app)
  respond(sent[0]!, 429, { 'retry-after': '30' })
  t.equal(app.controller!.aborted, false, 'waiting, no attempt on the wire')
  t.equal(app.controller!.reason, null)
  app.controller!.abort(new Error('the user left'))
  t.strictSame(app.seen, ['start', 'error the user left'])
  t.equal(sent.length, 1)
  t.equal(app.controller!.aborted, true)
  t.match(retry.stats(), { attempts: 1, retries: 0 })
})

t.test('a refusal whose body breaks off is still retried; an aborted one is not', async (t) => {
  const { dispatch, sent } = scripted()
  const app = recorder()
  admissionRetry({ baseDelayMs: 1, maxDelayMs: 1 })(dispatch)(GET, app)
  sent[0]!.handler.onResponseStart?.(sent[0]!.controller, 503, {}, '')
  sent[0]!.handler.onResponseError?.(sent[0]!.controller, new Error('socket closed'))
  await new Promise((resolve) => setTimeout(resolve, 5))
  t.equal(sent.length, 2, 'retried')
  sent[1]!.handler.onResponseStart?.(sent[1]!.controller, 503, {}, '')
  app.controller!.abort(new Error('aborted'))
  sent[1]!.handler.onResponseError?.(sent[1]!.controller, new Error('aborted'))
  t.strictSame(app.seen, ['start', 'error aborted'])
})

t.test('an error before any response, and an upgrade, go to the application as they are', async (t) => {
  const { dispatch, sent } = scripted()
  const app = recorder()
  admissionRetry()(dispatch)(GET, app)
  sent[0]!.handler.onRequestUpgrade?.(sent[0]!.controller, 101, {}, null as never)
  sent[0]!.handler.onResponseError?.(sent[0]!.controller, new Error('ECONNRESET'))
  t.strictSame(app.seen, ['start', 'upgrade 101', 'error ECONNRESET'])
})

t.test('a dispatch that throws when a held request finally goes: the application gets the error', async (t) => {
  let now = 1_000_000
  const { dispatch, sent } = scripted()
  let broken = false
  const failing = (opts: Dispatcher.DispatchOptions, handler: Handler): boolean => {
    if (broken) throw new Error('the dispatcher is closed')
    return dispatch(opts, handler)
  }
  const retry = admissionRetry({ now: () => now })
  const composed = retry(failing)
  composed(GET, recorder())
  respond(sent[0]!, 503, { 'retry-after': '1' })
  t.equal(retry.stats().pauses, 1)
  broken = true
  const app = recorder()
  t.equal(composed(GET, app), true, 'held: accepted, sent later')
  now += 1000
  await new Promise((resolve) => setTimeout(resolve, 1100))
  t.strictSame(app.seen, ['error the dispatcher is closed'])
})

t.test('a timer that fires early by the injected clock waits again: nothing goes before the time', async (t) => {
  let now = 5_000_000
  const { dispatch, sent } = scripted()
  const retry = admissionRetry({ now: () => now })
  const composed = retry(dispatch)
  composed(GET, recorder())
  respond(sent[0]!, 503, { 'retry-after': '1' })
  composed(GET, recorder())
  await new Promise((resolve) => setTimeout(resolve, 1100))
  t.equal(sent.length, 1, 'the clock has not moved: still held')
  now += 1000
  await new Promise((resolve) => setTimeout(resolve, 1100))
  t.equal(sent.length, 3, 'both went once the clock reached the time')
  t.match(retry.stats(), { waits: 2, waitedMs: 2000, pauses: 1 })
})

t.test('onRetry that throws: the retry goes on, counted, warned once', async (t) => {
  const warnings: string[] = []
  const onWarning = (w: Error): void => { warnings.push(w.message) }
  process.on('warning', onWarning)
  t.teardown(() => { process.off('warning', onWarning) })
  const { dispatch, sent } = scripted()
  const retry = admissionRetry({ baseDelayMs: 1, maxDelayMs: 1, onRetry () { throw new Error('bug') } })
  for (let i = 0; i < 2; i++) {
    const app = recorder()
    retry(dispatch)(GET, app)
    respond(sent.at(-1)!, 503)
    await new Promise((resolve) => setTimeout(resolve, 5))
    respond(sent.at(-1)!, 200)
    t.strictSame(app.seen.at(-3), 'response 200')
  }
  await new Promise((resolve) => setImmediate(resolve))
  t.equal(retry.stats().callbackErrors, 2)
  t.equal(retry.stats().retries, 2)
  t.equal(warnings.filter((w) => w.includes('onRetry threw')).length, 1)
})

t.test('what is not retried is passed on: a method, a body, the budget, the retries, a wait too long, a status', async (t) => {
  const cases: Array<[string, Dispatcher.DispatchOptions, Parameters<typeof admissionRetry>[0], number, Record<string, string>, Partial<ReturnType<ReturnType<typeof admissionRetry>['stats']>>]> = [
    ['POST', { ...GET, method: 'POST' }, {}, 503, {}, { retries: 0 }],
    ['a stream body', { ...GET, method: 'PUT', body: (async function * () { yield 'x' })() as never }, {}, 503, {}, { retries: 0 }],
    ['the budget spent', GET, { budget: { ratio: 0, minPerSecond: 0 } }, 503, {}, { retries: 0, retriesDenied: 1 }],
    ['no retries', GET, { maxRetries: 0 }, 429, {}, { retries: 0 }],
    ['a wait past maxWaitMs', GET, { maxWaitMs: 1000 }, 503, { 'retry-after': '2' }, { retries: 0, pauses: 0 }],
    ['a status not listed', GET, { statusCodes: [429] }, 503, {}, { retries: 0 }]
  ]
  for (const [name, opts, options, status, headers, stats] of cases) {
    const { dispatch, sent } = scripted()
    const app = recorder()
    const retry = admissionRetry(options)
    retry(dispatch)(opts, app)
    respond(sent[0]!, status, headers, 'no')
    t.strictSame(app.seen, ['start', `response ${status}`, 'data no', 'end'], name)
    t.match(retry.stats(), { requests: 1, attempts: 1, ...stats }, name)
  }
})
