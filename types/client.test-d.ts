// An ES module consumer of `fastify-admission/client` (`dist/client/index.d.ts`): the interceptor
// composed into undici's dispatchers, its options and counters typed.
import { Agent, Pool, fetch } from 'undici'
import { admissionRetry, RETRY_ATTEMPT_HEADER, type AdmissionRetryOptions, type AdmissionRetryStats, type RetryEvent } from 'fastify-admission/client'

const options: AdmissionRetryOptions = { maxRetries: 2, budget: { ratio: 0.1, minPerSecond: 1 }, onRetry: (event: RetryEvent) => { void event.waitMs } }
const retry = admissionRetry(options)
const agent = new Agent().compose(retry)
const pool = new Pool('http://localhost:3000').compose(retry)
void fetch('http://localhost:3000/', { dispatcher: agent })
void pool
const stats: AdmissionRetryStats = retry.stats()
const retries: number = stats.retries
const header: string = RETRY_ATTEMPT_HEADER
void retries; void header
// @ts-expect-error an unknown option
admissionRetry({ retries: 3 })
// @ts-expect-error ratio is a number
admissionRetry({ budget: { ratio: '10%' } })
