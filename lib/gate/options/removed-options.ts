/**
 * Options of earlier versions that are now part of another, and where each went: a registration
 * that still gives one is refused with an `AdmissionOptionError` naming its place (the "did you
 * mean" of the validation toolkit, as for the peers' options), never read in silence.
 */
function moved (becomes: string, why: string): string {
  return `moved to ${becomes}: ${why}`
}

export const REMOVED_HINTS: Readonly<Record<string, string>> = Object.freeze({
  limitStatusCode: moved('`refusal: { limitStatusCode }`', 'one option shapes the built-in refusal'),
  responseBody: moved("`refusal: 'json' | 'text' | 'problem' | 'error'` (or `refusal: { body }`)", 'one option shapes the built-in refusal'),
  fastRefusals: moved('`refusal: { fast }`', 'one option shapes the built-in refusal'),
  allowListSkipsShedding: moved('`allowList: { clients, skipsShedding: true }`', 'a property of the allow list'),
  criticalReserve: moved('`maxInFlight: { limit, criticalReserve }` (or in the adaptive or fleet object)', 'a share of that limit'),
  maxIdentities: moved('`backend: memoryBackend({ maxIdentities })`', 'the memory backend\'s own bound, set where the backend is made')
})
