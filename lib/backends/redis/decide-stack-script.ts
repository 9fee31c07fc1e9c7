import { createHash } from 'node:crypto'
import { DECIDE_LUA } from './decide-script.js'

/**
 * The Redis backend's second script: one decision over a stack of policies (several keys of one
 * identity, in one hash slot), all or nothing, atomically. It is assembled here from the text of
 * the single-key script (`decide-script.ts`), cut at the lines named below: the parts that parse a
 * policy, read and validate a stored state and decide on it are that script's own, pasted once per
 * policy, so the two scripts cannot drift apart, and `DECIDE_LUA` itself stays untouched (its SHA
 * is pinned and its Redis CPU measured; the stack costs it nothing). A boundary line that an edit
 * moves or rewords fails the import, loudly, rather than building another script.
 */

/**
 * The lines of `script` from the one that starts with `from` up to the one that starts with `to`
 * (excluded). Throws when either is not there.
 */
export function section (script: string, from: string, to: string): string {
  const start = script.indexOf('\n' + from)
  const end = start === -1 ? -1 : script.indexOf('\n' + to, start + 1)
  if (end === -1) throw new Error(`decide-stack-script: the decision script has no lines from ${JSON.stringify(from)} to ${JSON.stringify(to)}`)
  return script.slice(start + 1, end + 1)
}

/** `text` with its one occurrence of `from` replaced by `to`. Throws unless there is exactly one. */
export function swapOnce (text: string, from: string, to: string): string {
  const at = text.indexOf(from)
  if (at === -1 || text.indexOf(from, at + 1) !== -1) throw new Error(`decide-stack-script: ${JSON.stringify(from)} is not in the decision script exactly once`)
  return text.slice(0, at) + to + text.slice(at + from.length)
}

// The single script's parts, in its order. PARSE reads `fingerprint` into algorithm, limitText,
// windowText, burstText; NUMBERS into limit, windowMs, burst; NOW sets now from testNow or TIME
// and answers {3, now} past `deadline`; HELPERS defines floorDiv, ceilDiv, decimal; ONE_KEY
// computes the policy's constants, reads and validates `key` (a conflict answers {1, fp}) and
// decides (allowed, remaining, retryAfterMs, resetAt, recoversAt; the new state n1, n2, n3, the
// trusted stored one s1, s2, s3; fresh, worst); WRITE stores the new state (or only a missing TTL).
const PARSE = section(DECIDE_LUA, 'local algorithm, limitText', 'if deadline then deadline = tonumber(deadline) end')
const NUMBERS = section(DECIDE_LUA, 'local limit = tonumber(limitText)', 'local now\n')
const NOW = section(DECIDE_LUA, 'local now\n', '-- arithmetic.ts')
const HELPERS = section(DECIDE_LUA, '-- arithmetic.ts', '-- Each algorithm: fields')
// A conflict names the policy too: which key holds another one. It is answered once every key has
// been seen (each leaves with a TTL, whatever it holds): the first one is kept, and the loop goes
// on to the next key (`break` leaves the `repeat … until true` around one key's lines).
const ONE_KEY = swapOnce(section(DECIDE_LUA, '-- Each algorithm: fields', '-- Expires when fully recovered'),
  '    return { 1, storedFingerprint }\n', '    conflict = conflict or { 1, storedFingerprint, i }\n    break\n')
const WRITE = section(DECIDE_LUA, '-- Expires when fully recovered', 'if allowed then\n')

export const DECIDE_STACK_LUA = `-- fastify-admission: one decision over a stack of policies, all or nothing, atomically.
--
-- KEYS[i]      policy i's state of one identity, <prefix>{<address>:<identity>}/<i - 1>: the
--              same hash tag for every key of a stack, so all are in one slot (Redis Cluster)
-- ARGV[1]      the cost: a positive integer, at most every policy's capacity (the caller checks it);
--              for a charge, the units (taken, or returned when negative)
-- ARGV[2]      '0' consume, '1' check (decide, store nothing), '2' charge: every policy takes the
--              units as the single-key script's "c<units>" does (clamped to twice its capacity,
--              which charges exactly the same), and every charged state is stored whatever it
--              then decides for a cost-1 request, which is the answer
-- ARGV[2 + i]  policy i's fingerprint
-- ARGV[n + 3]  TESTS ONLY: the time, as ARGV[3] of the single-key script ('' when a deadline follows)
-- ARGV[n + 4]  optional, the deadline, as ARGV[4] of the single-key script
--
-- The lines that decide one key are the single-key script's own (decide-script.ts, whose header
-- documents the stored value, its validation, the TTL and the arithmetic), pasted below once per
-- policy, unindented, by decide-stack-script.ts. Every policy is decided on its stored state
-- first; only then is anything written:
-- - every policy had room, and this is no check: each new state is stored with its TTL (full
--   recovery), as the single-key script stores it;
-- - otherwise nothing is consumed under any policy (no unit wasted on a request that was
--   refused): each key is left as it is, and only a missing TTL is set, to its state's recovery.
--   The one exception is a stored value the script does not trust (a key of another type among
--   them): it is replaced by the worst legitimate state it was decided as, exactly as the
--   single-key script does — that state refuses every cost, so it takes nothing, and it bounds
--   the lock by the policy's recovery time.
-- - a key holding another policy (a conflict) is left as it is, with the caller's recovery time
--   as its TTL if it has none; the other keys are still read and left as a refusal leaves them,
--   so that every key the script was given has a TTL afterwards, whatever it found; the first
--   conflict is the answer.
--
-- Reply, integers only:
--   {0, allowed (1|0), now, then for each policy: allowed (1|0), remaining, retryAfterMs, resetAt, moreAt}
--       When nothing was stored (a refusal or a check), a policy that had room answers for its
--       state as it stands: its remaining + the cost, and the stored state's recovery (now at the
--       earliest; now for a missing key) as its resetAt and as its moreAt (the first unit beyond
--       the standing state's is not known from the decision: later, never early); a policy that
--       refused answers with its refusal.
--   {1, stored fingerprint, i}   KEYS[i] holds another policy (the first such key): nothing
--                                consumed; each key left as a refusal leaves it
--   {3, now}                     past the deadline: nothing done

local n = #KEYS
local cost = tonumber(ARGV[1])
local dry = ARGV[2] == '1'
local charging = ARGV[2] == '2'
local amount
if charging and cost then amount, cost = cost, 1 end
local testNow = ARGV[n + 3]
if testNow == '' then testNow = nil end
local deadline = ARGV[n + 4]
-- ONE_KEY's \`standing\`: every stored state's recovery, for a refusal that stores nothing.
local standingWanted = true
if deadline then deadline = tonumber(deadline) end
if n == 0 or not cost or not (dry or charging or ARGV[2] == '0') or #ARGV < n + 2 or #ARGV > n + 4 or deadline == nil and ARGV[n + 4] then
  return redis.error_reply('fastify-admission: bad arguments')
end

${NOW}${HELPERS}-- Each policy decided on its stored state; the outcomes wait until every one is known. A key
-- of another policy has no decision (decided[i] stays nil): the first such is \`conflict\`.
local decided = {}
local all = true
local conflict
for i = 1, n do repeat
local key = KEYS[i]
local fingerprint = ARGV[2 + i]
-- A stack has no penalty (refused at registration): the single script's penalty locals, empty.
local quotaPrint, penaltyMode, penaltyMax = fingerprint, nil, nil
-- A decision takes its cost (commit); a charge moves the state by units and takes nothing more.
local units, commit = nil, true
${PARSE}if not algorithm then
  return redis.error_reply('fastify-admission: bad arguments')
end
${NUMBERS}if charging then units, commit = math.max(-2 * burst, math.min(2 * burst, amount)), false end
${ONE_KEY}if not allowed then all = false end
decided[i] = { key = key, fingerprint = fingerprint, fields = fields, fresh = fresh, worst = worst,
  n1 = n1, n2 = n2, n3 = n3, s1 = s1, s2 = s2, s3 = s3, recoversAt = recoversAt, standing = standing,
  allowed = allowed, remaining = remaining, retryAfterMs = retryAfterMs, resetAt = resetAt, moreAt = moreAt }
until true end

-- All or nothing (a conflict stores nothing); a charge is stored whatever it decides. A missing
-- key that stores nothing stays missing.
local store = (all or charging) and not dry and not conflict
for i = 1, n do
local d = decided[i]
if d and (store or not d.fresh) then
local key, fingerprint, fields, fresh, worst = d.key, d.fingerprint, d.fields, d.fresh, d.worst
local s1, s2, s3 = d.s1, d.s2, d.s3
local penaltyMode, pb, pk, sb, sk
-- WRITE's \`kept\` (a refusal's state left as stored) is decided here instead: nil, and the
-- state is the stored one whenever nothing is stored (below).
local kept
local n1, n2, n3, recoversAt = d.n1, d.n2, d.n3, d.recoversAt
if not store and not worst then
  -- Nothing consumed: the stored state stays as it is; a missing TTL ends at its own recovery.
  n1, n2, n3, recoversAt = s1, s2, s3, d.standing
end
${WRITE}end
end
if conflict then return conflict end

local reply = { 0, 0, now }
if all then reply[2] = 1 end
for i = 1, n do
  local d = decided[i]
  local at = 5 * i - 1
  if store or not d.allowed then
    reply[at], reply[at + 1], reply[at + 2], reply[at + 3], reply[at + 4] = d.allowed and 1 or 0, d.remaining, d.retryAfterMs, d.resetAt, d.moreAt
  else
    -- Every kernel's remaining falls by exactly the cost it admits.
    local standing = math.max(now, d.standing)
    reply[at], reply[at + 1], reply[at + 2], reply[at + 3], reply[at + 4] = 1, d.remaining + cost, 0, standing, standing
  end
end
return reply
`

/** The stack script's SHA-1, as `EVALSHA` names it. */
export const DECIDE_STACK_SHA = createHash('sha1').update(DECIDE_STACK_LUA).digest('hex')
