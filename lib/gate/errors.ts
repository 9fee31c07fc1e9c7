import { inspect } from 'node:util'

/** Every error this plugin throws by its own decision; `code` is stable across versions. */
export class AdmissionError extends Error {
  // Each class names itself: the bundle may rename a class (`class _X`), and `name` is `new.target.name`.
  static { Object.defineProperty(this, 'name', { value: 'AdmissionError' }) }
  readonly code: string
  constructor (code: string, message: string) {
    super(message)
    this.name = new.target.name
    this.code = code
  }
}

/** An option or a route's `config.admission` that is not valid; `path` names it, `value` is what was given. */
export class AdmissionOptionError extends AdmissionError {
  static { Object.defineProperty(this, 'name', { value: 'AdmissionOptionError' }) }
  readonly path: string
  readonly value: unknown
  constructor (path: string, expected: string, value: unknown, message?: string, cause?: unknown) {
    super('ADMISSION_INVALID_OPTION', message ?? `Expected \`${path}\` to be ${expected}, got ${show(value)}`)
    this.path = path
    this.value = value
    if (cause !== undefined) this.cause = cause
  }

  /** The same complaint about a policy, from the rates capability's validator (shared by both). */
  static from (error: { path: string, value: unknown, message: string }): AdmissionOptionError {
    return new AdmissionOptionError(error.path, '', error.value, error.message, error)
  }
}

/**
 * The `key(request)` option returned something that is not a key: not a string, or longer than
 * the bound. The message says what was wrong, never the value itself (which may come from the
 * request, and Fastify may show the message in a 500); `value` holds it, for logs.
 */
export class AdmissionKeyError extends AdmissionError {
  static { Object.defineProperty(this, 'name', { value: 'AdmissionKeyError' }) }
  readonly value: unknown
  readonly statusCode = 500
  constructor (value: unknown, got: string) {
    super('ADMISSION_INVALID_KEY', `Expected the \`key\` option to return a string of at most 1024 UTF-8 bytes, got ${got}`)
    this.value = value
  }
}

/** A value as a reader wants it in a message: short, typed, one line. */
export function show (value: unknown): string {
  const text = inspect(value, { depth: 1, breakLength: Infinity, maxStringLength: 80, maxArrayLength: 8 })
  return typeof value === 'object' && value !== null ? text : `${text} (${value === null ? 'null' : typeof value})`
}
