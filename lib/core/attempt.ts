/**
 * A request's attempt number, from the text of its attempt header (`Retry-Attempt`): `1` is a first
 * attempt, `2`, `3`, … are retries. Absent or malformed text (not 1 to 9 decimal digits, a sign,
 * a space, a list of values) is a first attempt: the header can only lower a request's own
 * priority, so a client gains nothing by sending nonsense, and the gate trusts nothing it cannot read.
 */
export function attemptOf (text: string | undefined): number {
  if (text === undefined || !/^[0-9]{1,9}$/.test(text)) return 1
  const n = Number(text)
  return n >= 1 ? n : 1
}

/** Whether the attempt header's text says the request is a retry (attempt 2 or later). */
export function isRetry (text: string | undefined): boolean {
  return attemptOf(text) >= 2
}

/**
 * The count of slots below which a retry may take one, for a limit L with a share kept for first
 * attempts: L - floor(share * L). A retry is refused while that many or more are held, so the last
 * floor(share * L) slots are first attempts' own; a limit too small for a whole slot of reserve
 * (share * L < 1) keeps none, and retries are taken as first attempts are.
 */
export function retryLimit (limit: number, share: number): number {
  return limit - Math.floor(limit * share)
}
