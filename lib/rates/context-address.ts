import { numbered, segment } from './address.js'
import { RatesInvalidArgumentError } from './errors.js'

/**
 * Structural addresses of Fastify encapsulation contexts: the path of plugin names (and
 * prefixes) from the context that registered this plugin. The same code gives the same address in
 * every process, so a limiter's quota is addressed alike everywhere — never a random id.
 * Siblings with the same name and prefix are told apart by their order among themselves. The
 * language of addresses is address.ts's.
 */
export class ContextAddresses {
  private readonly addresses = new WeakMap<object, string>()
  private readonly seen = new Map<string, number>()

  constructor (root: object, rootAddress = 'app') {
    this.addresses.set(root, rootAddress)
  }

  /** Called from `onRegister` for each new context, in registration order. */
  register (instance: object, pluginName: string | undefined, prefix: string | undefined): string {
    const parent = this.of(Object.getPrototypeOf(instance) as object)
    const address = numbered(this.seen, `${parent}/${segment(pluginName ?? 'anonymous', prefix)}`)
    this.addresses.set(instance, address)
    return address
  }

  /**
   * The address of a context (a fastify-plugin shares its parent's object, so its parent's
   * address). A context created before this plugin was registered never passed `onRegister`: it
   * is addressed now, from its own name and prefix, and its ordinal among same-named siblings is
   * the order in which they first ask — stable for code that asks while it loads.
   */
  of (instance: object): string {
    const known = this.addresses.get(instance)
    if (known !== undefined) return known
    const parent = Object.getPrototypeOf(instance) as object | null
    if (parent === null) throw new RatesInvalidArgumentError('this', 'a Fastify instance inside the one that registered fastify-admission (a context outside it asked for an address)', instance)
    const context = instance as { pluginName?: string, prefix?: string }
    return this.register(instance, context.pluginName, context.prefix)
  }
}
