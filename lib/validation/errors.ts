import { complaintMessage, type Complain } from './checks.js'
import { keepValue } from './show.js'
import { brandError, brandedInstance } from './brand.js'

/** Every error this plugin throws by its own decision; `code` is stable across versions. */
export class AdmissionError extends Error {
  // Each class names itself: the bundle may rename a class (`class _X`), and `name` is `new.target.name`.
  static { brandError(this, 'AdmissionError') }
  /** An instance of this class of any copy of the package (its ESM and CommonJS builds): see `brandError`. */
  static override [Symbol.hasInstance] (value: unknown): boolean { return brandedInstance(this, value) }
  declare readonly code: string
  constructor (code: string, message: string) {
    super(message)
    this.name = new.target.name
    this.code = code
  }
}

/** An option or a route's `config.admission` that is not valid; `path` names it, `value` (not enumerable) is what was given. */
export class AdmissionOptionError extends AdmissionError {
  static { brandError(this, 'AdmissionOptionError') }
  declare readonly path: string
  declare readonly value: unknown
  constructor (path: string, expected: string, value: unknown, details: { subject?: string, got?: string } = {}) {
    super('ADMISSION_INVALID_OPTION', complaintMessage({ path, expected, value, ...details }))
    this.path = path
    keepValue(this, value)
  }

  /** The validation toolkit's complaints, as this error. */
  static readonly complain: Complain = ({ path, expected, value, subject, got }) =>
    new AdmissionOptionError(path, expected, value, { ...(subject === undefined ? {} : { subject }), ...(got === undefined ? {} : { got }) })
}

