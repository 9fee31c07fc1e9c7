/** The in-flight gate's outcome: whether a slot was taken, and the count after it. */
export interface InFlight {
  readonly ok: boolean
  readonly n: number
}

export function acquire (n: number, maxInFlight: number): InFlight {
  return n + 1 <= maxInFlight ? { ok: true, n: n + 1 } : { ok: false, n }
}

/** Never below zero, so a release that is repeated by mistake cannot open extra slots. */
export function release (n: number): number {
  return n > 0 ? n - 1 : 0
}
