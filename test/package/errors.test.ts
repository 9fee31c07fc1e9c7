import t, { type Test } from 'tap'
import { createRequire } from 'node:module'
import { inspect } from 'node:util'
import { AdmissionAllowListError, AdmissionChargeError, AdmissionKeyError, AdmissionScopeError, AdmissionTierError } from '../../lib/gate/errors.js'

// The error classes as published: the built ESM and CJS (reached by the package's own name), where
// the bundler may rename a class (`class _AdmissionOptionError`) and `name` is `new.target.name`.
// Every exported error class must keep its real name (on the class and on its instances), its
// place in the hierarchy and its code. `npm test` builds first. The exported classes are the
// kinds; the gate's cases of a kind are its subclasses, not exported, told apart by `code`.

type Module = Record<string, unknown>
type ErrorClass = new (...args: never[]) => Error & { code: string }

const policy = { algorithm: 'fixed-window', limit: 1, windowMs: 1_000 }

// Every exported error class: how to make one, what it extends, its code. The abstract RatesError
// is checked through its subclasses.
const concrete: Array<{ name: string, base: string, code: string, make: (X: ErrorClass) => Error }> = [
  { name: 'AdmissionError', base: 'AdmissionError', code: 'SOME_CODE', make: (X) => new (X as unknown as new (c: string, m: string) => Error)('SOME_CODE', 'm') },
  { name: 'AdmissionOptionError', base: 'AdmissionError', code: 'ADMISSION_INVALID_OPTION', make: (X) => new (X as unknown as new (p: string, e: string, v: unknown) => Error)('maxInFlight', 'a number', 'x') },
  { name: 'AdmissionCallbackError', base: 'AdmissionError', code: 'ADMISSION_CALLBACK_FAILED', make: (X) => new (X as unknown as new (c: string, v: unknown) => Error)('key', undefined) },
  { name: 'AdmissionRefusalError', base: 'AdmissionError', code: 'ADMISSION_SHED', make: (X) => new (X as unknown as new (s: number, r: string, n: number, m: string) => Error)(503, 'shed', 1, 'Server is at capacity, retry in 1 second') },
  { name: 'RatesInvalidArgumentError', base: 'RatesError', code: 'RATES_INVALID_ARGUMENT', make: (X) => new (X as unknown as new (p: string, e: string, v: unknown) => Error)('cost', 'one', 0) },
  { name: 'RatesPolicyConflictError', base: 'RatesError', code: 'RATES_POLICY_CONFLICT', make: (X) => new (X as unknown as new (n: string, a: unknown, b: unknown) => Error)('send', policy, { ...policy, limit: 2 }) },
  { name: 'RatesUnavailableError', base: 'RatesError', code: 'RATES_UNAVAILABLE', make: (X) => new (X as unknown as new (r: string) => Error)('full') },
  { name: 'RatesStoppedError', base: 'RatesError', code: 'RATES_STOPPED', make: (X) => new (X as unknown as new () => Error)() }
]
const all = [...concrete.map(({ name }) => name), 'RatesError'].sort()

function errorClasses (mod: Module): string[] {
  return Object.keys(mod)
    .filter((key) => typeof mod[key] === 'function' && (mod[key] as { prototype?: unknown }).prototype instanceof Error)
    .sort()
}

function checks (t: Test, mod: Module): void {
  t.same(errorClasses(mod), all, 'the exported error classes, all of them listed here')
  for (const name of all) t.equal((mod[name] as ErrorClass).name, name, `${name}: the class's name`)
  for (const { name, base, code, make } of concrete) {
    const X = mod[name] as ErrorClass
    const error = make(X) as Error & { code: string }
    t.equal(error.name, name, `${name}: the instance's name`)
    t.equal(error.constructor, X, `${name}: its constructor`)
    t.ok(error instanceof X, `${name}: instanceof itself`)
    t.ok(error instanceof (mod[base] as ErrorClass), `${name}: instanceof ${base}`)
    t.ok(error instanceof Error, `${name}: instanceof Error`)
    t.equal(error.code, code, `${name}: code`)
    t.match(error.stack, new RegExp(`^${name}: `), `${name}: the stack's first line`)
    // A refusal has no stack frames (an answer, not a fault): inspect() then brackets the first line.
    t.match(inspect(error), new RegExp(name === 'AdmissionRefusalError' ? `^\\[${name}: ` : `^${name}: `), `${name}: as inspect() prints it`)
  }
  const AdmissionOptionError = mod['AdmissionOptionError'] as ErrorClass & { complain: (c: { path: string, expected: string, value: unknown }) => Error }
  const from = AdmissionOptionError.complain({ path: 'rateLimit.limit', expected: 'a positive safe integer', value: 0 })
  t.equal(from.name, 'AdmissionOptionError', 'AdmissionOptionError.complain(): the instance\'s name')
  t.ok(from instanceof AdmissionOptionError, 'AdmissionOptionError.complain(): instanceof')
}

t.test('ESM: every error class keeps its name, hierarchy and code', async (t) => {
  checks(t, await import('fastify-admission') as Module)
})

t.test('CJS: every error class keeps its name, hierarchy and code', async (t) => {
  checks(t, createRequire(import.meta.url)('fastify-admission') as Module)
})

// The cases of a kind, made by the source (as the tests run it) and checked against the built
// package's kinds: `instanceof` holds across the two copies by the classes' brands.
const cases: Array<{ name: string, kind: string, code: string, callback?: string, error: Error }> = [
  { name: 'AdmissionKeyError', kind: 'AdmissionCallbackError', code: 'ADMISSION_INVALID_KEY', callback: 'key', error: new AdmissionKeyError(42, 'a value of type number') },
  { name: 'AdmissionAllowListError', kind: 'AdmissionCallbackError', code: 'ADMISSION_INVALID_ALLOW_LIST_RESULT', callback: 'allowList', error: new AdmissionAllowListError(Promise.resolve(true)) },
  { name: 'AdmissionTierError', kind: 'AdmissionCallbackError', code: 'ADMISSION_UNKNOWN_TIER', callback: 'tier', error: new AdmissionTierError(7, ['free', 'pro']) },
  { name: 'AdmissionChargeError', kind: 'AdmissionCallbackError', code: 'ADMISSION_INVALID_CHARGE', callback: 'charge', error: new AdmissionChargeError('GET /x', 1.5, 100) },
  { name: 'AdmissionScopeError', kind: 'AdmissionError', code: 'ADMISSION_UNGATED_ROUTE', error: new AdmissionScopeError(['GET /x']) }
]

t.test('each case is an error of its kind, with its own code, name and value', async (t) => {
  for (const mod of [await import('fastify-admission') as Module, createRequire(import.meta.url)('fastify-admission') as Module]) {
    for (const { name, kind, code, callback, error } of cases) {
      const fields = error as Error & { code: string, callback?: string, statusCode?: number, value?: unknown }
      t.ok(error instanceof (mod[kind] as ErrorClass), `${name}: instanceof ${kind}`)
      t.ok(error instanceof (mod['AdmissionError'] as ErrorClass), `${name}: instanceof AdmissionError`)
      t.notOk(name in mod, `${name} is not exported: its kind is`)
      t.equal(fields.code, code, `${name}: code`)
      t.equal(error.name, name, `${name}: the instance's name says the case`)
      if (callback !== undefined) {
        t.equal(fields.callback, callback, `${name}: the callback`)
        t.equal(fields.statusCode, 500, `${name}: a 500 where it fails a request`)
        t.notOk(Object.keys(error).includes('value'), `${name}: value is not enumerable`)
      }
    }
  }
})
