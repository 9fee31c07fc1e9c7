/** The HTTP variants: what each server runs and what its ratio to bare Fastify must reach. */
export interface Variant {
  readonly name: string
  readonly description: string
  /** The status every response must have. */
  readonly status: number
  /** Targets on the median ratio to bare Fastify. */
  readonly minRatio?: number
  /** Minimum median of the per-round ratio `this / other` (same round). */
  readonly vs?: { readonly variant: string, readonly minRatio: number }
}

const LISTED: readonly Variant[] = [
  { name: 'bare', description: 'bare Fastify', status: 200 },
  { name: 'bare-twin', description: "bare Fastify in another process (the method's own error)", status: 200 },
  { name: 'admit', description: 'fastify-admission admitting (random keys)', status: 200, minRatio: 0.9, vs: { variant: 'rl-admit', minRatio: 1.1 } },
  { name: 'refuse', description: 'fastify-admission refusing (429)', status: 429, minRatio: 1.0 },
  { name: 'rl-admit', description: '@fastify/rate-limit admitting (random keys)', status: 200 },
  { name: 'under-pressure', description: '@fastify/under-pressure 9, defaults', status: 200 },
  { name: 'admission-pressure', description: 'fastify-admission, pressure: { maxEventLoopDelay: 1000 } only', status: 200 },
  { name: 'rl-refuse', description: '@fastify/rate-limit refusing (429)', status: 429 },
  { name: 'redis-admit', description: 'fastify-admission on Redis admitting (random keys)', status: 200, vs: { variant: 'rl-redis-admit', minRatio: 1.3 } },
  { name: 'rl-redis-admit', description: '@fastify/rate-limit on Redis admitting (random keys)', status: 200 },
  { name: 'redis-refuse', description: 'fastify-admission on Redis refusing (429, deny cache)', status: 429 },
  { name: 'redis-refuse-nocache', description: 'fastify-admission on Redis refusing (429, denyCache: false)', status: 429 },
  { name: 'rl-redis-refuse', description: '@fastify/rate-limit on Redis refusing (429)', status: 429 },
  // Not in the default run (BENCH_VARIANTS): where the plugin's cost goes.
  { name: 'redis-admit-fw', description: "fastify-admission on Redis admitting (random keys), fixed-window (@fastify/rate-limit's algorithm)", status: 200 },
  { name: 'redis-hot', description: 'fastify-admission on Redis admitting one hot key (a route-wide limit), leases: true', status: 200 },
  { name: 'rl-redis-hot', description: '@fastify/rate-limit on Redis admitting one hot key', status: 200 },
  { name: 'hooks', description: 'fastify-admission, both gates off (hook cost)', status: 200 },
  { name: 'admit-noheaders', description: 'fastify-admission admitting, headers: false', status: 200 },
  { name: 'admit-nomaxinflight', description: 'fastify-admission admitting, maxInFlight: false', status: 200 },
  { name: 'refuse-noheaders', description: 'fastify-admission refusing (429), headers: false', status: 429 },
  { name: 'hook-429', description: 'one onRequest hook that answers a constant 429 (the floor for refusing)', status: 429 },
  { name: 'onrequest-empty', description: 'one empty onRequest hook', status: 200 },
  { name: 'onrequest-2headers', description: 'one onRequest hook that sets RateLimit-Policy and RateLimit', status: 200 },
  { name: 'empty-hooks', description: 'empty onRequest + onResponse hooks', status: 200 },
  { name: 'empty-hooks-abort', description: 'empty onRequest + onResponse + onRequestAbort hooks', status: 200 }
]

const REDIS_VARIANTS = ['redis-admit', 'redis-admit-fw', 'rl-redis-admit', 'redis-refuse', 'redis-refuse-nocache', 'rl-redis-refuse', 'redis-hot', 'rl-redis-hot']

/**
 * The Redis variants again, named `<variant>-ap`, with ioredis's `enableAutoPipelining` (used by
 * bench/redis/, `npm run bench:redis`); no targets of their own here.
 */
export const VARIANTS: readonly Variant[] = [
  ...LISTED,
  ...LISTED.filter((v) => REDIS_VARIANTS.includes(v.name)).map((v) => ({ name: `${v.name}-ap`, description: `${v.description}, auto-pipelining`, status: v.status }))
]

export const DEFAULT_VARIANTS = ['bare', 'bare-twin', 'admit', 'refuse', 'rl-admit', 'rl-refuse', 'under-pressure', 'admission-pressure', 'redis-admit', 'rl-redis-admit', 'redis-refuse', 'rl-redis-refuse']

export function variant (name: string): Variant {
  const found = VARIANTS.find((v) => v.name === name)
  if (found === undefined) throw new Error(`unknown variant ${name}; known: ${VARIANTS.map((v) => v.name).join(', ')}`)
  return found
}

/** The request header that carries the client identity in every variant's load. */
export const CLIENT_HEADER = 'x-client'
