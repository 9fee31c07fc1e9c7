/**
 * Structural addresses of Fastify encapsulation contexts: the path of plugin names (and
 * prefixes) from the context that registered this plugin. The same code gives the same address in
 * every process, so a limiter's quota is addressed alike everywhere — never a random id.
 * Siblings with the same name and prefix are told apart by their order among themselves.
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
    const segment = encodeURIComponent(pluginName ?? 'anonymous') + (prefix ? `@${encodeURIComponent(prefix)}` : '')
    const path = `${parent}/${segment}`
    const ordinal = this.seen.get(path) ?? 0
    this.seen.set(path, ordinal + 1)
    const address = ordinal === 0 ? path : `${path}~${ordinal}`
    this.addresses.set(instance, address)
    return address
  }

  /**
   * The address of a context. A context this registry never saw (created before the plugin was
   * registered, or a fastify-plugin that shares its parent) answers with its nearest known ancestor.
   */
  of (instance: object): string {
    let current: object | null = instance
    while (current !== null) {
      const address = this.addresses.get(current)
      if (address !== undefined) return address
      current = Object.getPrototypeOf(current) as object | null
    }
    throw new Error('fastify-admission: a context outside the registering instance asked for an address')
  }
}
