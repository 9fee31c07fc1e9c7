import { AdmissionOptionError } from '../validation/errors.js'

/** The package's metrics on one registry (or Meter) under one prefix, shared by every registration reporting there. */
export interface SharedSet {
  /** The histogram's bucket bounds, fixed when the set was made. */
  readonly buckets: readonly number[]
  /** A live registration reports there under this label. */
  reports (registration: string): boolean
}

/**
 * The set `registration` joins on `target` under `settings.prefix`, made by `make` for the first
 * registration there (a set that fails to be made is not kept). Refused, with a typed error:
 * buckets other than those its histogram was made with, a label another live registration there
 * already reports under (each registration's series are told apart by it). `where` names the
 * target in the errors (`registry`, `Meter`). Returns the set and the target's sets by prefix.
 */
export function joinSet<T extends object, S extends SharedSet> (sets: WeakMap<T, Map<string, S>>, target: T, where: string,
  settings: { readonly prefix: string, readonly buckets: readonly number[] }, registration: string, make: () => S): { set: S, byPrefix: Map<string, S> } {
  let byPrefix = sets.get(target)
  if (byPrefix === undefined) sets.set(target, byPrefix = new Map())
  let set = byPrefix.get(settings.prefix)
  if (set === undefined) {
    set = make()
    byPrefix.set(settings.prefix, set)
  } else if (set.buckets.join() !== settings.buckets.join()) {
    throw new AdmissionOptionError('metrics.buckets', `the buckets this ${where}'s histogram was made with (${set.buckets.join(', ')})`, settings.buckets)
  }
  if (set.reports(registration)) {
    throw new AdmissionOptionError('metrics.registration',
      `a label no other registration reporting to this ${where} has (each registration's series are told apart by it; two apps registering at their root both have \`app\`)`, registration)
  }
  return { set, byPrefix }
}
