import { admissionPlugin } from './plugin.js'

export { admissionPlugin as admission }
export { AdmissionError, AdmissionOptionError, AdmissionKeyError } from './errors.js'
export type { AdmissionOptions, AdmissionRouteOptions, RateLimitOptions } from './options.js'
export type { AdmissionDecorator } from './plugin.js'
export type { AdmissionStats, GateCounters } from './stats.js'
export default admissionPlugin
