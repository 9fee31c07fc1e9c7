import { createHash } from 'node:crypto'

/**
 * Where a registration of the plugin sits, as a stable string: the path of encapsulation
 * contexts from the application's root (`app`, then each context's own plugin name and prefix),
 * then `~n` for the n-th registration (from 0, counted over the whole application) at the same path.
 * The same code registers in the same order in every process, so every process of one
 * application gives a registration the same address, and so the same quota on a shared backend —
 * while a root registration and one in a child plugin never share one.
 */
const kRegistrations = Symbol.for('fastify-admission.registrations')

interface Context { pluginName: string, prefix?: string, [kRegistrations]?: Map<string, number> }

export function registrationAddress (fastify: object): string {
  const segments: string[] = []
  let context = fastify as Context
  for (;;) {
    const parent = Object.getPrototypeOf(context) as Context | null
    // The root instance is a plain object; every context below it is created from its parent.
    if (parent === null || parent === Object.prototype) break
    // `pluginName` lists the fastify-plugins registered into the context after its own name.
    const own = context.pluginName.split(' -> ')[0]!
    segments.unshift(part(nameOf(own)) + (context.prefix ? `@${part(context.prefix)}` : ''))
    context = parent
  }
  const path = ['app', ...segments].join('/')
  const root = context
  const seen = root[kRegistrations] ?? (root[kRegistrations] = new Map())
  const ordinal = seen.get(path) ?? 0
  seen.set(path, ordinal + 1)
  return ordinal === 0 ? path : `${path}~${ordinal}`
}

/**
 * A context's name as a segment. Fastify names an anonymous plugin by its first lines of source;
 * that is stable for the same code but unfit for a key: it becomes `anonymous-<8 hex of its SHA-1>`.
 */
function nameOf (pluginName: string): string {
  if (/^[\w.@/-]{1,64}$/.test(pluginName)) return pluginName
  return `anonymous-${createHash('sha1').update(pluginName).digest('hex').slice(0, 8)}`
}

/** One segment: URI-encoded, and `~` too, which marks an ordinal. */
export function part (text: string): string {
  return encodeURIComponent(text).replaceAll('~', '%7E')
}
