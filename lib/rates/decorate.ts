import type { FastifyInstance } from 'fastify'
import { ContextAddresses } from './context-address.js'
import { type Rates, ratesFor } from './rates.js'
import type { RatesRuntime } from './runtime.js'

/**
 * Gives every encapsulation context its own `fastify.rates`, addressed by where the context sits
 * in the plugin tree (a fastify-plugin shares the context it is registered in). Returns the
 * addresses, which the HTTP gate uses for its own limiters.
 */
export function decorateRates (fastify: FastifyInstance, runtime: RatesRuntime): ContextAddresses {
  const addresses = new ContextAddresses(fastify)
  fastify.addHook('onRegister', (instance, opts) => {
    addresses.register(instance, instance.pluginName, (opts as { prefix?: string }).prefix)
  })
  const byContext = new WeakMap<object, Rates>()
  if (!fastify.hasDecorator('rates')) {
    fastify.decorate('rates', {
      getter (this: FastifyInstance): Rates {
        let rates = byContext.get(this)
        if (rates === undefined) {
          rates = ratesFor(runtime, addresses.of(this))
          byContext.set(this, rates)
        }
        return rates
      }
    })
  }
  fastify.addHook('onClose', async () => { await runtime.stop() })
  return addresses
}
