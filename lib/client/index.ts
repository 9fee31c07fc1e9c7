// fastify-admission/client: the companion client, an undici interceptor. It imports nothing of
// the server's (the plugin, Fastify) and nothing of undici at run time: undici is the
// application's, an optional peer, reached through the `dispatch` it hands the interceptor.
// Bad options throw the package's AdmissionOptionError (`code` ADMISSION_INVALID_OPTION, `path`):
// told apart by its code, or with `instanceof` through the main entry, which exports the class.
export { admissionRetry, type AdmissionRetryInterceptor } from './interceptor.js'
export type { AdmissionRetryOptions, RetryEvent } from './options.js'
export type { AdmissionRetryStats } from './state.js'
export { RETRY_ATTEMPT_HEADER } from './attempt-header.js'
