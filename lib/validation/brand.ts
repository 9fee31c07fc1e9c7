/** Where an error class's brand is kept, on its prototype: one key for every copy of the package. */
const BRAND = Symbol.for('fastify-admission.error-class')

interface Branded { [BRAND]?: string }

const own = (object: object, key: PropertyKey): boolean => Object.prototype.hasOwnProperty.call(object, key)

/**
 * Names an error class (the bundle may rename a class, `class _X`, and `name` is the class's) and
 * brands its prototype, so that `instanceof` holds across copies of the package: the ESM build and
 * the CommonJS build each define the classes, and an application that both imports and requires
 * the package (or two of its dependencies that do) has two `AdmissionOptionError`s. With
 * `brandedInstance` as the classes' `Symbol.hasInstance`, an error of either copy is an instance of
 * both. `code` is the way to tell errors apart across versions; the brand is the class's name.
 */
export function brandError (cls: { readonly prototype: object }, name: string): void {
  Object.defineProperty(cls, 'name', { value: name })
  Object.defineProperty(cls.prototype, BRAND, { value: `fastify-admission:${name}` })
}

/**
 * `value instanceof cls` for a branded class: by its prototype chain, as always, or by a prototype
 * with the class's brand (the same class of another copy of the package). A class without a brand
 * of its own (an application's subclass) is checked as always.
 */
export function brandedInstance (cls: { readonly prototype: object }, value: unknown): boolean {
  if (Function.prototype[Symbol.hasInstance].call(cls, value)) return true
  const prototype = cls.prototype as Branded
  if (typeof value !== 'object' || value === null || !own(prototype, BRAND)) return false
  for (let p = Object.getPrototypeOf(value) as (object & Branded) | null; p !== null; p = Object.getPrototypeOf(p) as (object & Branded) | null) {
    if (own(p, BRAND) && p[BRAND] === prototype[BRAND]) return true
  }
  return false
}
