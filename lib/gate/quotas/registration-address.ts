import { createHash } from 'node:crypto'
import { numbered, segment } from '../../rates/address.js'

/**
 * Where a registration of the plugin sits, as a stable string: the path of encapsulation
 * contexts from the application's root (`app`, then each context's own plugin name and prefix),
 * then `~n` for the n-th registration (from 0, counted over the whole application) at the same path.
 * The same code registers in the same order in every process, so every process of one
 * application gives a registration the same address, and so the same quota on a shared backend —
 * while a root registration and one in a child plugin never share one. The language of addresses
 * is lib/rates/address.ts's.
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
    segments.unshift(segment(nameOf(own), context.prefix))
    context = parent
  }
  const path = ['app', ...segments].join('/')
  const root = context
  return numbered(root[kRegistrations] ?? (root[kRegistrations] = new Map()), path)
}

/**
 * A context's name as a segment. Fastify names an anonymous plugin by its first lines of source;
 * that is stable for the same code but unfit for a key: it becomes `anonymous-<8 hex of its SHA-1>`.
 */
function nameOf (pluginName: string): string {
  if (/^[\w.@/-]{1,64}$/.test(pluginName)) return pluginName
  return `anonymous-${createHash('sha1').update(pluginName).digest('hex').slice(0, 8)}`
}
