import t from 'tap'
import { admissionRetry } from '../../lib/client/index.js'
import { AdmissionOptionError } from '../../lib/index.js'

t.test('bad options: an AdmissionOptionError naming the option and what it should be', async (t) => {
  const cases: Array<[unknown, string, RegExp]> = [
    [{ maxRetries: -1 }, 'options.maxRetries', /a whole number of retries from 0 to 100/],
    [{ maxRetries: 1.5 }, 'options.maxRetries', /from 0 to 100/],
    [{ retries: 3 }, 'options.retries', /`maxRetries`/],
    [{ maxRetires: 3 }, 'options.maxRetires', /did you mean `maxRetries`/],
    [{ budget: { ratio: 2 } }, 'options.budget.ratio', /a share of requests in \[0, 1\]/],
    [{ budget: { minPerSecond: -1 } }, 'options.budget.minPerSecond', /0 or more/],
    [{ budget: { windowMs: 500 } }, 'options.budget.windowMs', /from 1000 to 60000/],
    [{ budget: { percent: 1 } }, 'options.budget.percent', /ratio, minPerSecond, windowMs/],
    [{ budget: 0.1 }, 'options.budget', /a plain object \{ ratio\?, minPerSecond\?, windowMs\? \}/],
    [{ baseDelayMs: 0 }, 'options.baseDelayMs', /a positive whole number of ms/],
    [{ baseDelayMs: 500, maxDelayMs: 100 }, 'options.maxDelayMs', /at least baseDelayMs \(500\)/],
    [{ maxWaitMs: Infinity }, 'options.maxWaitMs', /a positive whole number of ms/],
    [{ methods: 'GET' }, 'options.methods', /an array of HTTP methods/],
    [{ methods: ['GET', 'not a method'] }, 'options.methods[1]', /an HTTP method such as 'GET'/],
    [{ statusCodes: [200] }, 'options.statusCodes[0]', /an error status from 400 to 599/],
    [{ onRetry: 'log' }, 'options.onRetry', /a function/],
    [{ now: 1 }, 'options.now', /a function/],
    [[], 'options', /a plain object of admissionRetry options/]
  ]
  for (const [options, path, expected] of cases) {
    let error: unknown
    try {
      admissionRetry(options as never)
    } catch (thrown) {
      error = thrown
    }
    t.ok(error instanceof AdmissionOptionError, `${path}: an AdmissionOptionError`)
    t.match(error, { code: 'ADMISSION_INVALID_OPTION', path, message: expected })
  }
})

t.test('good options: defaults, and the given ones taken', async (t) => {
  t.type(admissionRetry(), 'function')
  t.type(admissionRetry(Object.assign(Object.create(null) as object, { maxRetries: 0 })), 'function', 'a null-prototype bag')
  const retry = admissionRetry({ maxRetries: 5, budget: { ratio: 0.2, minPerSecond: 10, windowMs: 60_000 }, baseDelayMs: 50, maxDelayMs: 50, maxWaitMs: 1000, methods: ['get', 'POST'], statusCodes: [503], onRetry () {}, now: Date.now, random: Math.random })
  t.strictSame(retry.stats(), { requests: 0, attempts: 0, retries: 0, retriesDenied: 0, waits: 0, waitedMs: 0, pauses: 0, paced: 0, callbackErrors: 0 })
  t.not(retry.stats(), retry.stats(), 'a copy each time')
})
