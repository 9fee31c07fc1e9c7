/**
 * The options of @fastify/rate-limit 11 and @fastify/under-pressure 9 that this plugin names
 * otherwise, and what each is here: an unknown option that is one of them is told its place
 * (`max` → `rateLimit: { limit }`) instead of the list of options. Options of the same name here
 * (`allowList`, `ipv6Subnet`, `hook`, `errorResponseBuilder`) need none. See docs/migration/.
 */

const RATE_LIMIT = '@fastify/rate-limit'
/** Where the migration guide is for an installed package: `docs/` ships with it (package.json `files`). */
export const RATE_LIMIT_GUIDE = 'node_modules/fastify-admission/docs/migration/rate-limit.md'
const UNDER_PRESSURE = '@fastify/under-pressure'

function here (peer: string, name: string, becomes: string): string {
  return `${peer}'s \`${name}\` is ${becomes} here`
}

const ADD_HEADERS = "`headers`: `headers: { format: 'x-ratelimit' }` sends x-ratelimit-limit, -remaining and -reset on every response (all three, not one by one), `headers: false` none; `Retry-After` is on every refusal"

const PRESSURE_KEYS = ['maxEventLoopDelay', 'maxEventLoopUtilization', 'maxHeapUsedBytes', 'maxRssBytes', 'retryAfter', 'sampleInterval', 'exposeStatusRoute', 'healthCheck', 'healthCheckInterval', 'pressureHandler']

/** The plugin's options. */
export const PLUGIN_HINTS: Readonly<Record<string, string>> = Object.freeze({
  max: here(RATE_LIMIT, 'max', '`rateLimit: { limit, windowMs }` (a `max` that is a function of the request: `rateLimit: { tiers, tier }`)'),
  timeWindow: here(RATE_LIMIT, 'timeWindow', '`rateLimit: { limit, windowMs }`, `windowMs` in ms (no `\'1 minute\'` strings)'),
  keyGenerator: here(RATE_LIMIT, 'keyGenerator', '`key`, a synchronous (request) => string'),
  store: here(RATE_LIMIT, 'store', '`backend`: memoryBackend(), redisBackend() or a backend of your own'),
  redis: here(RATE_LIMIT, 'redis', '`backend: redisBackend({ client })`'),
  nameSpace: here(RATE_LIMIT, 'nameSpace', '`backend: redisBackend({ client, prefix })`'),
  skipOnError: here(RATE_LIMIT, 'skipOnError', "`onBackendError: 'allow'`"),
  cache: here(RATE_LIMIT, 'cache', '`backend: memoryBackend({ maxIdentities })` (live state is never evicted)'),
  global: here(RATE_LIMIT, 'global', '`rateLimit: false` (no plugin-wide limit), with `config.admission.rateLimit` on the routes that need one'),
  groupId: here(RATE_LIMIT, 'groupId', "a route's option, `config.admission.groupId`"),
  onExceeded: here(RATE_LIMIT, 'onExceeded', '`onLimit(request, retryAfterMs, key)`'),
  continueExceeding: here(RATE_LIMIT, 'continueExceeding', "the policy's `penalty: 'restart'` (`rateLimit: { limit, windowMs, penalty: 'restart' }`)"),
  exponentialBackoff: here(RATE_LIMIT, 'exponentialBackoff', "the policy's `penalty: 'double'` (`rateLimit: { limit, windowMs, penalty: 'double' }`, bounded: at most 64 windows unless `maxMs`)"),
  onExceeding: `${RATE_LIMIT}'s \`onExceeding\` has no equivalent here: subscribe to the \`fastify-admission:decision\` channel (DECISION_CHANNEL), whose events carry \`outcome\` and \`key\``,
  ban: `${RATE_LIMIT}'s \`ban\` has no equivalent here: count refusals in \`onLimit\` and answer 403 from \`errorResponseBuilder\` (${RATE_LIMIT_GUIDE})`,
  onBanReach: `${RATE_LIMIT}'s \`onBanReach\` has no equivalent here (there is no ban): see ${RATE_LIMIT_GUIDE}`,
  addHeaders: here(RATE_LIMIT, 'addHeaders', ADD_HEADERS),
  addHeadersOnExceeding: here(RATE_LIMIT, 'addHeadersOnExceeding', ADD_HEADERS),
  enableDraftSpec: here(RATE_LIMIT, 'enableDraftSpec: true', "`headers: { format: 'draft-6' }` (its ratelimit-limit, -remaining and -reset; the default format is the IETF draft 11's fields)"),
  message: `${UNDER_PRESSURE}'s \`message\` is \`errorResponseBuilder\` here (the body of every refusal), or \`refusal\` (a built-in body)`,
  customError: `${UNDER_PRESSURE}'s \`customError\` is \`errorResponseBuilder\` here (the body of every refusal), or \`refusal\` (a built-in body)`,
  eventLoopUtilizationMode: `${UNDER_PRESSURE}'s \`eventLoopUtilizationMode\` is always 'interval' here (\`pressure: { maxEventLoopUtilization }\`)`,
  ...Object.fromEntries(PRESSURE_KEYS.map((key) => [key, `${UNDER_PRESSURE}'s options go in \`pressure\` here: \`pressure: { ${key} }\``]))
})

/** A route's `config.admission` (@fastify/rate-limit's route `config.rateLimit`). */
export const ROUTE_HINTS: Readonly<Record<string, string>> = Object.freeze({
  max: here(RATE_LIMIT, 'max', '`rateLimit: { limit }` (the plugin\'s `windowMs` and `algorithm` are kept)'),
  timeWindow: here(RATE_LIMIT, 'timeWindow', '`rateLimit: { windowMs }`, in ms (the plugin\'s `limit` and `algorithm` are kept)'),
  continueExceeding: here(RATE_LIMIT, 'continueExceeding', "`rateLimit: { penalty: 'restart' }`"),
  exponentialBackoff: here(RATE_LIMIT, 'exponentialBackoff', "`rateLimit: { penalty: 'double' }`"),
  keyGenerator: `${RATE_LIMIT}'s route \`keyGenerator\` has no equivalent here: the key is the plugin's \`key\` (give the route a \`groupId\` or its own registration)`
})
