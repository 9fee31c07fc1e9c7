/** The seed's v1 refusal: a 503 whose body is the 12 bytes `lim rejected`. */
export interface Rejection {
  readonly status: 503
  readonly headers: {
    readonly 'retry-after': string
    readonly 'content-type': 'text/plain; charset=utf-8'
    readonly 'content-length': '12'
  }
  readonly body: 'lim rejected'
}

export const REJECTION_BODY = 'lim rejected'

/**
 * `retry` is a whole number of seconds. A fraction is rounded up (a shorter wait would send the
 * client back too early), a negative value is 0 and a value that is not finite is the largest safe
 * integer: the header is always the decimal of a non-negative integer. Finite values above the
 * largest safe integer are clamped to it too, since String() writes 1e21 and up in exponent form.
 */
export function rejection503 (retry: number): Rejection {
  const seconds = Number.isFinite(retry) ? Math.min(Number.MAX_SAFE_INTEGER, Math.max(0, Math.ceil(retry))) : Number.MAX_SAFE_INTEGER
  return {
    status: 503,
    headers: { 'retry-after': String(seconds), 'content-type': 'text/plain; charset=utf-8', 'content-length': '12' },
    body: REJECTION_BODY
  }
}
