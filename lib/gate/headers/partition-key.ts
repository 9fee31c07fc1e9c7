import { createHmac, randomBytes } from 'node:crypto'
import { AdmissionOptionError } from '../errors.js'
import { LIST_SEPARATOR, serializeByteSequence } from './structured-fields.js'

/** A client key's `pk` parameter (`;pk=:…:`), from the key. */
export type PartitionKey = (clientKey: string) => string

/** Bytes of the digest sent: 128 bits tell partitions apart; more would only lengthen every response. */
const SENT_BYTES = 16
const MIN_SECRET = 16

/**
 * `pk` (draft 11's partition key) of the client's quota: an HMAC-SHA256 of the client key under a
 * secret, its first 16 bytes — never the key itself, nor a plain hash of it, which anyone can
 * reverse for keys as few as IPv4 addresses (2^32 guesses). With `true` the secret is drawn at
 * registration: a client sees the same `pk` from this process only; processes that share quotas
 * (Redis) pass one secret to agree.
 */
export function partitionKeyOption (value: unknown): PartitionKey | undefined {
  if (value === false) return undefined
  if (value !== true && (typeof value !== 'string' || value.length < MIN_SECRET)) {
    const expected = `true (a secret drawn at registration) or a secret string of at least ${MIN_SECRET} characters (the HMAC key that digests client keys)`
    // A secret too short is still a secret: its length is shown, never its text (the error keeps no copy).
    if (typeof value === 'string') throw new AdmissionOptionError('headers.partitionKey', expected, `${value.length} characters`, { got: `a string of ${value.length} characters (not shown: a secret)` })
    throw new AdmissionOptionError('headers.partitionKey', expected, value)
  }
  const secret = value === true ? randomBytes(32) : value
  return (clientKey) => `;pk=${serializeByteSequence(createHmac('sha256', secret).update(clientKey).digest().subarray(0, SENT_BYTES))}`
}

/**
 * `RateLimit`'s value with `pk` on each item. The items are the gate's own serialisation — names
 * and integer parameters, none of which holds the separator — so each is the text between separators.
 */
export function withPartitionKey (rateLimit: string, pk: string): string {
  return rateLimit.split(LIST_SEPARATOR).join(pk + LIST_SEPARATOR) + pk
}
