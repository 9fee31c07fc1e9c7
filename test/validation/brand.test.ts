import t from 'tap'
import { AdmissionError, AdmissionOptionError, RatesError, RatesInvalidArgumentError } from '../../lib/index.js'
import { brandError } from '../../lib/validation/brand.js'

// `instanceof` across copies of the package (its ESM and CommonJS builds define each class once
// each): an error of another copy is an instance of this copy's class, and of its base classes.
// test/package/exports.test.ts checks the built package, imported and required in one process.

/** The classes as another copy of the package defines them: other classes, the same brands. */
function otherCopy (): { OptionError: new () => Error, InvalidArgument: new () => Error } {
  class Base extends Error {}
  brandError(Base, 'AdmissionError')
  class OptionError extends Base {}
  brandError(OptionError, 'AdmissionOptionError')
  class RatesBase extends Error {}
  brandError(RatesBase, 'RatesError')
  class InvalidArgument extends RatesBase {}
  brandError(InvalidArgument, 'RatesInvalidArgumentError')
  return { OptionError, InvalidArgument }
}

t.test("another copy's errors are instances of this copy's classes, and only of theirs", async (t) => {
  const other = otherCopy()
  const option = new other.OptionError()
  t.ok(option instanceof AdmissionOptionError)
  t.ok(option instanceof AdmissionError)
  t.notOk(option instanceof RatesError)
  t.notOk(option instanceof RatesInvalidArgumentError)
  const rates = new other.InvalidArgument()
  t.ok(rates instanceof RatesInvalidArgumentError)
  t.ok(rates instanceof RatesError)
  t.notOk(rates instanceof AdmissionError)
  t.ok(new AdmissionOptionError('x', 'y', 1) instanceof AdmissionError, 'and its own, as always')
  t.notOk(new AdmissionError('CODE', 'm') instanceof AdmissionOptionError, 'a base is not its subclass')
  t.notOk(new Error('plain') instanceof AdmissionError)
  t.equal(AdmissionError[Symbol.hasInstance](1), false, 'a primitive is no instance')
  t.equal(AdmissionError[Symbol.hasInstance](null), false)
})

t.test("an application's own subclass is checked as always", async (t) => {
  class MyOptionError extends AdmissionOptionError {}
  const mine = new MyOptionError('x', 'y', 1)
  t.ok(mine instanceof MyOptionError)
  t.ok(mine instanceof AdmissionOptionError)
  t.notOk(new AdmissionOptionError('x', 'y', 1) instanceof MyOptionError, 'not every AdmissionOptionError is one of it')
  t.notOk(new (otherCopy().OptionError)() instanceof MyOptionError)
  t.equal(AdmissionOptionError.name, 'AdmissionOptionError')
})
