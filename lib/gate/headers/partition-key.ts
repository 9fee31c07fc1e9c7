import { createHmac, randomBytes } from 'node:crypto'
import { AdmissionOptionError } from '../errors.js'
import { LIST_SEPARATOR, serializeByteSequence } from './structured-fields.js'

/** A client key's `pk` parameter (`;pk=:…:`), from the key. */
export type PartitionKey = (clientKey: string) => string

/** A client key's digest, as `pk` carries it: a byte sequence (`:…:`) of 16 bytes. */
export type KeyDigest = (clientKey: string) => string

/** Bytes of the digest sent: 128 bits tell partitions apart; more would only lengthen every response. */
const SENT_BYTES = 16
const MIN_SECRET = 16

/**
 * A client key's digest: an HMAC-SHA256 of the key under `secret`, its first 16 bytes — never the
 * key itself, nor a plain hash of it, which anyone can reverse for keys as few as IPv4 addresses
 * (2^32 guesses). Without a secret of the application's, one is drawn: digests then agree within
 * this process only.
 */
export function keyDigest (secret: string | Buffer = randomBytes(32)): KeyDigest {
  return (clientKey) => serializeByteSequence(createHmac('sha256', secret).update(clientKey).digest().subarray(0, SENT_BYTES))
}

/**
 * The digest `pk` (draft 11's partition key) carries: `true`, under a secret drawn at registration (a
 * client sees the same `pk` from this process only); a string, under that secret — processes that
 * share quotas (Redis) pass one secret to agree. `false`: none.
 */
export function partitionKeyOption (value: unknown): KeyDigest | undefined {
  if (value === false) return undefined
  if (value !== true && (typeof value !== 'string' || value.length < MIN_SECRET)) {
    const expected = `true (a secret drawn at registration) or a secret string of at least ${MIN_SECRET} characters (the HMAC key that digests client keys)`
    // A secret too short is still a secret: its length is shown, never its text (the error keeps no copy).
    if (typeof value === 'string') throw new AdmissionOptionError('headers.partitionKey', expected, `${value.length} characters`, { got: `a string of ${value.length} characters (not shown: a secret)` })
    throw new AdmissionOptionError('headers.partitionKey', expected, value)
  }
  return value === true ? keyDigest() : keyDigest(value)
}

/** `pk` of a client key, by its digest. */
export function partitionKeyOf (digest: KeyDigest): PartitionKey {
  return (clientKey) => `;pk=${digest(clientKey)}`
}

/**
 * `RateLimit`'s value with `pk` on each item. The items are the gate's own serialisation — names
 * and integer parameters, none of which holds the separator — so each is the text between separators.
 */
export function withPartitionKey (rateLimit: string, pk: string): string {
  return rateLimit.split(LIST_SEPARATOR).join(pk + LIST_SEPARATOR) + pk
}
