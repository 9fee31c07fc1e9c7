/**
 * The address language of quotas on a backend, one for the HTTP gate and the rates capability, so
 * that both live side by side on one backend (and so in one Redis, where an address is part of
 * every key: test/golden pins the strings). An address names a Fastify encapsulation context, then
 * a quota in it:
 *
 * - a context is `app`, then `/<segment>` for each context down to it;
 * - a segment is a context's plugin name, then `@<prefix>` when it has a prefix, each `part()`ed;
 * - `~<n>` (from 1) follows the n-th further context counted at the same path (`numbered()`);
 * - the quota follows `#`: the gate's `admission[@<version>]:<route>` (lib/gate/quotas.ts), a
 *   named limiter's encoded name (`limiterAddress()`), or under `global`, one shared by all.
 *
 * Both walk Fastify's contexts (each created from its parent's object) in their own way, which the
 * strings keep: the gate (lib/gate/registration-address.ts) addresses a registration of the plugin
 * from the application's root, names a context by its own plugin name (hashed when it is not a
 * plain name), with the context's whole prefix, and counts registrations of the plugin over the
 * application; the rates capability (context-address.ts) addresses contexts from the one that
 * registered the plugin, by the plugin name and the prefix option each registration gave (a context
 * created before the plugin: by its whole name chain and prefix, when it first asks), and counts
 * every context registered at a path.
 */

/**
 * One segment's text: URI-encoded, and `~` too, which `encodeURIComponent` leaves as it is and
 * which marks an ordinal: a plugin named `a~1` stays apart from the second plugin named `a`.
 */
export function part (text: string): string {
  return encodeURIComponent(text).replaceAll('~', '%7E')
}

/** A context's segment: its name, and `@` and its prefix when it has one (an empty prefix is none). */
export function segment (name: string, prefix: string | undefined): string {
  return part(name) + (prefix ? `@${part(prefix)}` : '')
}

/**
 * `path` as the next context counted at it: the first is `path`, the n-th after it `path~n`.
 * `seen` holds the counts by path.
 */
export function numbered (seen: Map<string, number>, path: string): string {
  const ordinal = seen.get(path) ?? 0
  seen.set(path, ordinal + 1)
  return ordinal === 0 ? path : `${path}~${ordinal}`
}

/** A named limiter's quota in the context (or scope) at `address`: its name URI-encoded, `~` kept. */
export function limiterAddress (address: string, name: string): string {
  return `${address}#${encodeURIComponent(name)}`
}
