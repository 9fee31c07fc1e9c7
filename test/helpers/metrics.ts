import { Registry } from 'prom-client'
import type { RatesBackend } from '../../lib/index.js'
import type { BackendLimiter } from '../../lib/rates/backend.js'

export interface Sample { labels: Record<string, string | number>, value: number, metricName?: string }
export interface Family { name: string, type: string, help: string, values: Sample[] }

/** The registry's metrics as prom-client reports them at a scrape. */
export async function scrape (registry: Registry): Promise<Map<string, Family>> {
  const families = await registry.getMetricsAsJSON() as unknown as Family[]
  return new Map(families.map((family) => [family.name, family]))
}

/** The value of the one sample of `name` whose labels include `labels`; undefined when there is none. */
export function valueOf (families: Map<string, Family>, name: string, labels: Record<string, string> = {}): number | undefined {
  const family = families.get(name.replace(/_(bucket|count|sum)$/, ''))
  const wanted = Object.entries(labels)
  const found = family?.values.filter((sample) => (sample.metricName ?? family.name) === name && wanted.every(([k, v]) => sample.labels[k] === v))
  if (found === undefined || found.length === 0) return undefined
  if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`)
  return found[0]!.value
}

/** A backend deciding by promise (as Redis does), each consume() answered by `answer()`. */
export function scriptedBackend (answer: () => unknown): RatesBackend & { calls: number } {
  const backend = {
    kind: 'scripted',
    calls: 0,
    limiter: (_address: string, policy: BackendLimiter['policy']): BackendLimiter => ({
      policy,
      consume: (() => { backend.calls++; return answer() }) as BackendLimiter['consume'],
      state: async () => undefined,
      delete: async () => false
    }),
    stop: async () => {}
  }
  return backend
}

/** A decision a backend would give: allowed, or denied with a wait. */
export function decision (allowed: boolean, retryAfterMs = 0): unknown {
  return allowed
    ? { allowed: true, denied: false, remaining: 1, resetAt: Date.now() }
    : { allowed: false, denied: true, remaining: 0, resetAt: Date.now() + retryAfterMs, retryAfterMs }
}
