import { createHash } from 'node:crypto'

/**
 * The Redis backend's only script: one rate-limit decision on one key, atomically. Its source is
 * kept here, as a string in a TypeScript module, so that the built package carries it with no file
 * to locate at run time (tsup bundles this module like any other). One script serves the four
 * algorithms: the parts they share (time, policy check, storage, TTL, reply) are written once, and
 * there is one SHA to load and one NOSCRIPT fallback.
 *
 * Each algorithm below is a line-by-line twin of its TypeScript kernel in `lib/core/rates/`
 * (same operations in the same order, so the same doubles come out); the differential tests in
 * `test/backends/redis/` hold them to that, and hold the script's validation of a stored state to
 * its TypeScript twin in `stored-state.ts`. Any edit to this text changes `DECIDE_SHA`, which a test pins,
 * so a change to the script is always a deliberate one.
 */
export const DECIDE_LUA = `-- fastify-admission: one rate-limit decision on one key, atomically.
--
-- KEYS[1]  the state of one identity under one limiter: <prefix>{<address>:<identity>}
-- ARGV[1]  the policy fingerprint "<algorithm>:<limit>:<windowMs>[:<burst>][~restart|~double.<maxMs>]"
--          (policyFingerprint()); the suffix is the penalty (penalty.ts)
-- ARGV[2]  the cost: a positive integer, at most the policy's capacity (the caller checks it); or
--          a charge, "c<units>" (charge.ts): units taken (positive) or returned (negative), at most
--          one capacity, whatever the state holds. A charge may leave a debt (below); its answer is
--          what a cost-1 request would see right after it, and it takes nothing more.
-- ARGV[3]  TESTS ONLY, never sent by the backend in production (it sends '' there when ARGV[4]
--          follows): the time to decide at, in epoch ms, instead of the server's TIME. Key expiry
--          runs on the server's real clock, which a test time does not follow, so with ARGV[3] the
--          state is stored without a TTL and no TTL is set (the test deletes it). Expiry changes
--          no decision anyway: a key expires once its state has fully recovered, and a fully
--          recovered state decides exactly like a missing (fresh) one.
-- ARGV[4]  optional, the deadline: the first server time (epoch ms) at which the call is too late.
--          At or past it the script reads and writes nothing and answers {3, now}. The backend
--          sends the server time at which its own timeout fires, as it estimates it from the
--          server's now in earlier replies (a lower bound: a call that runs after the caller gave
--          up is refused; one that runs just before may be refused too).
--
-- Stored value: one string, "<fingerprint> <n1> <n2> [<n3>]", the kernel's state fields in the
-- order of its write(): token-bucket "tokens last", fixed-window "start count",
-- sliding-window-counter "start previous current", gcra "tat"; with a penalty, then "blockedUntil
-- strikes" (penalty.ts: while now < blockedUntil every request is refused, the algorithm's state
-- left as it was, and the block grows). A key whose fingerprint differs
-- from ARGV[1] is never reset or rewritten: the script answers with a conflict (and gives the key
-- the caller's recovery time as its TTL if it has none: no backend leaves a key without one).
-- A key that holds no string at all (a hash, a list … another program wrote: GET answers
-- WRONGTYPE) has no fingerprint to stand for: it is a state not trusted (see below), decided as
-- the worst one and stored so (SET replaces a key of any type) — not an error on every call, which
-- no TTL would ever end.
--
-- Validation (stored-state.ts is the TypeScript twin): a state with our fingerprint is read only
-- if every field is a canonical decimal integer ('0' or no leading zero, at most 16 digits), the
-- field count is the algorithm's, and every field is in range for the policy at the script's time
-- now, R being the policy's worst recovery time (token-bucket and gcra ceil(burst * windowMs /
-- limit), fixed-window windowMs, sliding-window-counter 2 * windowMs):
--   token-bucket            -D * burst * windowMs <= tokens <= burst * windowMs, last <= now + R
--   fixed-window            start a multiple of windowMs, start <= now + R, count <= (1 + D) * limit
--   sliding-window-counter  start a multiple of windowMs, start <= now + R, previous <= limit,
--                           current <= (1 + D) * limit
--   gcra                    tat <= (now + R) * s + (1 + D) * tau (what a state written at now + R can hold)
-- D is 1 for a policy with room for a charge's debt of one capacity (policy.ts chargeProblem():
-- its largest number, tripled, stays a safe integer), 0 for any other, which no charge reaches.
-- Only the token bucket's level is signed: a '-' anywhere else is not trusted.
--   a penalty's block       blockedUntil <= now + R + max(R, its longest block), strikes <= 64
-- The allowance R lets a server clock step back by up to R: the kernels decide such states as
-- they do for any clock that stepped back. Any other state is not trusted and not reset either:
-- the script decides as if it held the worst state a client can legitimately be in at now
-- (token-bucket empty at now, fixed-window full in now's window, sliding-window-counter current
-- window full, gcra the whole burst taken at now; with a penalty, not blocked), which denies and recovers within R, and stores
-- the result (with its TTL). So a stored state never locks a client beyond now + 2R (an accepted
-- state: its own time <= now + R, plus R) or, holding a charge's debt, one more full recovery; a
-- rejected one beyond now + R.
--
-- TTL: every path that reads the key leaves it with one. A write sets PX to full recovery; a
-- denial on a trusted stored state writes nothing (the state is kept: below, before the write),
-- and only then the script asks PTTL and sets the expiry if the key has none (a key another
-- program wrote, or a PERSIST).
--
-- Reply, integers only (Redis truncates a Lua number to an integer reply; every value here is one):
--   {0, 1, remaining, retryAfterMs, resetAt, now, moreAt}                allowed
--   {0, 0, remaining, retryAfterMs, resetAt, now, moreAt, n1, n2[, n3]}  denied, with the state after it
--   moreAt is the kernels' (types.ts): the first time more than remaining units pass, now when full
--   {1, stored fingerprint}                                       the key holds another policy
--   {3, now}                                                      past the deadline: nothing done
--
-- Arithmetic: Lua numbers are doubles, as in JavaScript. Policy validation keeps every value the
-- kernels handle a safe integer (< 2^53), so sums, differences and products are exact; floorDiv
-- and ceilDiv are exact as in arithmetic.ts (math.fmod is C's fmod, exact like JavaScript's %,
-- whereas Lua's own % is a - floor(a/b)*b and rounds). Where a kernel writes Math.floor(a / b),
-- the script writes math.floor(a / b): the same rounded division, then the same floor.

local key = KEYS[1]
local fingerprint = ARGV[1]
local cost = tonumber(ARGV[2])
-- A charge moves the state by units, then decides a cost of 1 on it without taking it (commit
-- false); a penalty's block decides without taking either (below).
local units
local commit = true
if not cost and ARGV[2] then
  units = tonumber(string.match(ARGV[2], '^c(%-?%d+)$'))
  if units then cost, commit = 1, false end
end
local testNow = ARGV[3]
if testNow == '' then testNow = nil end
local deadline = ARGV[4]
-- Only a stack wants every stored state's recovery (decide-stack-script.ts sets it).
local standingWanted = false

-- A penalty is a suffix: a plain find keeps the usual fingerprint off a second pattern.
local quotaPrint = fingerprint
local penaltyMode, penaltyMax
if string.find(fingerprint, '~', 1, true) then
  local maxText
  quotaPrint, penaltyMode, maxText = string.match(fingerprint, '^([^~]*)~([a-z]+)%.?(%d*)$')
  if penaltyMode == 'double' and maxText ~= '' then
    penaltyMax = tonumber(maxText)
  elseif penaltyMode ~= 'restart' or maxText ~= '' then
    return redis.error_reply('fastify-admission: bad arguments')
  end
end
local algorithm, limitText, windowText, burstText = string.match(quotaPrint, '^([a-z-]+):(%d+):(%d+):?(%d*)$')
if deadline then deadline = tonumber(deadline) end
if not algorithm or not cost or deadline == nil and ARGV[4] then
  return redis.error_reply('fastify-admission: bad arguments')
end
local limit = tonumber(limitText)
local windowMs = tonumber(windowText)
local burst = limit
-- The gate's policies have burst = limit: the same text, the same number, one tonumber() less.
if burstText ~= '' and burstText ~= limitText then burst = tonumber(burstText) end

local now
if testNow then
  now = tonumber(testNow)
else
  -- Seconds and microseconds, as digit strings: arithmetic reads them as numbers without a call
  -- (tonumber() and math.floor() are C calls, ~0.1 µs a decision); us % 1000 is exact below 10^6.
  local t = redis.call('TIME')
  local us = t[2] + 0
  now = t[1] * 1000 + (us - us % 1000) / 1000
end
-- Too late: the caller has given up on this call (its timeout fired); consume nothing.
if deadline and now >= deadline then
  return { 3, now }
end

-- arithmetic.ts (windowStart(t, w), math.floor(t / w) * w, is written inline where it is used).
-- Every call of a script runs its whole text again: only these three helpers are closures, and
-- each algorithm below is one branch of plain locals, so a call builds nothing for the others.
local function floorDiv(a, b)
  local r = math.fmod(math.fmod(a, b) + b, b)
  return (a - r) / b
end

local function ceilDiv(a, b)
  return -floorDiv(-a, b)
end

-- A stored field: canonical decimal digits ('0', or no leading zero: the first byte is 1 to 9,
-- above '0', which also keeps out a sign), at most 16 of them; nil otherwise. 16 digits may exceed
-- 2^53: tonumber() then rounds, monotonically, to a value beyond every bound below, as
-- JavaScript's Number() does.
local function decimal(f)
  if f and #f <= 16 and (f == '0' or string.byte(f) > 48) then return tonumber(f) end
  return nil
end

-- Each algorithm: fields (numbers per state), its worst recovery time R (ms) and, in its branch
-- below, fresh(now) -> state, worst(now) -> state and decide(state, now, cost) -> allowed,
-- remaining, retryAfterMs, resetAt, moreAt, next state, recoversAt. A state is n1, n2[, n3], in the order
-- of the stored value. gcra's constants are needed by its validation, so they are computed here.
local fields, recovery
local scale, interval, tau
if algorithm == 'token-bucket' then
  fields, recovery = 2, ceilDiv(burst * windowMs, limit)
elseif algorithm == 'fixed-window' then
  fields, recovery = 2, windowMs
elseif algorithm == 'sliding-window-counter' then
  fields, recovery = 3, 2 * windowMs
elseif algorithm == 'gcra' then
  -- gcra.ts: time in units of 1/s ms, s = limit / gcd(limit, windowMs); R = ceil(tau / s).
  local g = limit
  local b = windowMs
  while b ~= 0 do
    g, b = b, math.fmod(g, b)
  end
  scale = limit / g
  interval = windowMs / g
  tau = burst * interval
  fields, recovery = 1, ceilDiv(tau, scale)
else
  return redis.error_reply('fastify-admission: unknown algorithm ' .. algorithm)
end
-- The algorithm's own fields; a penalty stores two more after them.
local quotaFields = fields
if penaltyMode then fields = fields + 2 end

-- The stored state, checked against the caller's policy (see Validation above).
-- pcall: a key of another type fails GET with WRONGTYPE, read as a state not trusted (the
-- header's Stored value, in decide-script.ts); any other error (an ACL that forbids GET) stays
-- the script's answer.
local stored = redis.pcall('GET', key)
local fresh = true
local worst = false
local n1, n2, n3, pb, pk
if type(stored) == 'table' then
  if string.find(stored.err, 'WRONGTYPE', 1, true) ~= 1 then return stored end
  fresh = false
  worst = true
elseif stored then
  -- The stored fingerprint is the value's leading run of non-spaces (%S: not C's isspace(), the
  -- bytes 32 and 9 to 13). Lua patterns cost about 10 ns a byte here, a plain find a few ns in
  -- all, so the usual case is read without a pattern over the fingerprint: a value that starts
  -- with the caller's fingerprint followed by a space or by nothing has exactly that fingerprint
  -- (the caller's contains no space), and its fields are matched from there; any other value has
  -- another one, read with '^%S*' (a conflict).
  local storedFingerprint, f1, f2, f3, f4, f5
  local after = #fingerprint + 1
  local b = string.byte(stored, after)
  if string.find(stored, fingerprint, 1, true) == 1 and (b == nil or b == 32 or b >= 9 and b <= 13) then
    storedFingerprint = fingerprint
    if fields == 1 then
      f1 = string.match(stored, '^ (%-?%d+)$', after)
    elseif fields == 2 then
      f1, f2 = string.match(stored, '^ (%-?%d+) (%d+)$', after)
    elseif fields == 3 then
      f1, f2, f3 = string.match(stored, '^ (%-?%d+) (%d+) (%d+)$', after)
    elseif fields == 4 then
      f1, f2, f3, f4 = string.match(stored, '^ (%-?%d+) (%d+) (%d+) (%d+)$', after)
    else
      f1, f2, f3, f4, f5 = string.match(stored, '^ (%-?%d+) (%d+) (%d+) (%d+) (%d+)$', after)
    end
    -- A penalty's two fields follow the algorithm's.
    if penaltyMode then
      if quotaFields == 1 then
        f4, f5, f2, f3 = f2, f3, nil, nil
      elseif quotaFields == 2 then
        f4, f5, f3 = f3, f4, nil
      end
    end
  else
    storedFingerprint = string.match(stored, '^%S*')
  end
  if storedFingerprint ~= fingerprint then
    if not testNow and redis.call('PTTL', key) == -1 then
      redis.call('PEXPIRE', key, string.format('%d', recovery))
    end
    return { 1, storedFingerprint }
  end
  fresh = false
  n1, n2, n3 = decimal(f1), decimal(f2), decimal(f3)
  -- A token bucket's level below empty: a '-' before canonical digits that are not 0.
  if algorithm == 'token-bucket' and f1 and string.byte(f1) == 45 then
    n1 = decimal(string.sub(f1, 2))
    if n1 then n1 = n1 > 0 and -n1 or nil end
  end
  local horizon = now + recovery
  local valid = n1 and (quotaFields < 2 or n2) and (quotaFields < 3 or n3)
  if valid and penaltyMode then
    pb, pk = decimal(f4), decimal(f5)
    local longest = windowMs
    if penaltyMax then longest = penaltyMax end
    valid = pb and pk and pb <= horizon + math.max(recovery, longest) and pk <= 64
  end
  if valid then
    -- D (above): room for a debt of one capacity, from the largest number it triples.
    local safe = 9007199254740991
    if algorithm == 'token-bucket' then
      local capacity = burst * windowMs
      local debt = 0
      if 3 * capacity <= safe then debt = capacity end
      valid = n1 >= -debt and n1 <= capacity and n2 <= horizon
    elseif algorithm == 'fixed-window' then
      local most = limit
      if 3 * limit <= safe then most = 2 * limit end
      valid = math.fmod(n1, windowMs) == 0 and n1 <= horizon and n2 <= most
    elseif algorithm == 'sliding-window-counter' then
      local most = limit
      if 3 * limit <= safe then most = 2 * limit end
      valid = math.fmod(n1, windowMs) == 0 and n1 <= horizon and n2 <= limit and n3 <= most
    else
      local ahead = tau
      if scale * 4102444800000 + 3 * tau <= safe then ahead = 2 * tau end
      valid = n1 <= horizon * scale + ahead
    end
  end
  worst = not valid
end
-- The numbers of a trusted stored state, to tell below whether the decision changed it.
local s1, s2, s3, sb, sk
if not fresh and not worst then s1, s2, s3, sb, sk = n1, n2, n3, pb, pk end
if penaltyMode and (fresh or worst) then pb, pk = 0, 0 end
-- penalty.ts: while blocked, the quota is only looked at (below).
if penaltyMode and now < pb then commit = false end

local t = now
local c = cost
-- charge() of the window kernels: a count moves into the live window, up to one window of debt
-- beyond the limit, down to 0 (units returned never reach a window that is gone). A closure made
-- only for a charge.
local chargedCount
if units then
  chargedCount = function(count)
    if units > 0 then return math.max(count, math.min(count + units, 2 * limit)) end
    return math.max(0, count + units)
  end
end
local allowed, remaining, retryAfterMs, resetAt, moreAt, recoversAt

if algorithm == 'token-bucket' then
  -- token-bucket.ts on bucket.ts take(): units of 1/windowMs of a token, capacity burst * windowMs,
  -- limit units a tick (interval 1), a cost c takes c * windowMs units.
  if fresh then
    n1, n2 = burst * windowMs, t
  elseif worst then
    n1, n2 = 0, t
  end
  local capacity = burst * windowMs
  local need = c * windowMs
  -- take(): refill whole ticks only; a clock that stepped back refills nothing; a stored state
  -- above capacity is capped. steps * limit may leave the safe range: the cap keeps it exact.
  local tokens = math.min(capacity, n1)
  local last = n2
  -- Ticks of 1 ms: the whole ticks since last are t - last (bucket.ts divides by its interval, 1).
  if t > last then
    tokens = math.min(capacity, tokens + (t - last) * limit)
    last = t
  end
  -- charge(): the level moves by units * windowMs, down to one capacity below empty, up to full.
  if units then
    local moved = tokens - units * windowMs
    if units > 0 then
      tokens = math.min(tokens, math.max(-capacity, moved))
    else
      tokens = math.min(capacity, moved)
    end
  end
  allowed = tokens >= need
  local retry = 0
  if allowed then
    if commit then tokens = tokens - need end
  else
    -- take()'s wait counts from last; a clock that stepped back waits for the gap too.
    retry = math.ceil(((need - tokens) * 1) / limit) + (last - t)
  end
  -- fullAt(): nothing refills before last, then limit units a tick; a full bucket is full now.
  local full = last + ceilDiv(math.max(0, capacity - tokens), limit)
  -- A level below empty (a debt) has no whole token.
  remaining, retryAfterMs, recoversAt = math.max(0, floorDiv(tokens, windowMs)), retry, full
  resetAt = full
  if tokens >= capacity then resetAt = t end
  -- One more whole token: (remaining + 1) * windowMs units, limit a tick from last.
  moreAt = t
  if remaining * windowMs < capacity then moreAt = last + ceilDiv((remaining + 1) * windowMs - tokens, limit) end
  n1, n2 = tokens, last

elseif algorithm == 'fixed-window' then
  -- fixed-window.ts: windows aligned to multiples of windowMs; roll forward only. A count above
  -- the limit is a debt: each window that ends repays limit of it.
  if fresh then
    n1, n2 = math.floor(t / windowMs) * windowMs, 0
  elseif worst then
    n1, n2 = math.floor(t / windowMs) * windowMs, limit
  end
  local current = math.floor(t / windowMs) * windowMs
  if current > n1 then n1, n2 = current, math.max(0, n2 - (current - n1) / windowMs * limit) end
  if units then n2 = chargedCount(n2) end
  allowed = n2 + c <= limit
  if allowed and commit then n2 = n2 + c end
  -- windowsUntilBelow(): windows until the count is repaid below b, at least one.
  local retry = 0
  if not allowed then retry = n1 + math.max(1, floorDiv(n2 - (limit - c + 1), limit) + 1) * windowMs - t end
  -- recovers: the end of the windows it spreads over while it counts anything, else its start.
  local recovers = n1
  if n2 > 0 then recovers = n1 + ceilDiv(n2, limit) * windowMs end
  remaining, retryAfterMs, recoversAt = math.max(0, limit - n2), retry, recovers
  -- An empty counter is full now; nothing comes back before a window ends, more once what is
  -- owed falls below the limit.
  resetAt, moreAt = t, t
  if n2 > 0 then
    resetAt = recovers
    moreAt = n1 + math.max(1, floorDiv(n2 - limit, limit) + 1) * windowMs
  end

elseif algorithm == 'sliding-window-counter' then
  -- sliding-window-counter.ts: the estimate previous * (W - e) / W + current, multiplied by W.
  -- State: n1 start, n2 previous, n3 current.
  local W = windowMs
  if fresh then
    n1, n2, n3 = math.floor(t / W) * W, 0, 0
  elseif worst then
    n1, n2, n3 = math.floor(t / W) * W, 0, limit
  end
  -- roll(): forward only. A current count above the limit is a debt spread over the windows
  -- after it, limit each: k windows on, previous = clamp(current - (k - 1) * limit, 0, limit) and
  -- current = max(0, current - k * limit).
  local start = math.floor(t / W) * W
  if start <= n1 then
    start = n1
  else
    local k = (start - n1) / W
    local owed = n3
    n2, n3 = math.min(limit, math.max(0, owed - (k - 1) * limit)), math.max(0, owed - k * limit)
  end
  n1 = start
  if units then n3 = chargedCount(n3) end
  local p = n2
  local cur = n3
  local e = math.max(0, t - start)
  local untilNext = start + W - t
  -- waitFor(): the least wait until more units pass on the counts p and counted.
  local function waitFor(counted, more)
    local room = limit - counted - more
    if room >= 0 then return untilNext - floorDiv(room * W, p) end
    local k = ceilDiv(-room, limit)
    local pk = math.min(limit, counted - (k - 1) * limit)
    local roomK = limit - math.max(0, counted - k * limit) - more
    return untilNext + (k - 1) * W + math.max(0, W - floorDiv(roomK * W, pk))
  end
  allowed = p * (W - e) <= (limit - cur - c) * W
  if allowed and commit then n3 = cur + c end
  remaining = math.max(0, limit - ceilDiv(p * (W - e), W) - n3)
  local retry = 0
  if not allowed then retry = waitFor(cur, c) end
  -- remaining + 1 more units than the state after it holds; none when full.
  moreAt = t
  if remaining ~= limit then moreAt = t + waitFor(n3, remaining + 1) end
  -- recovers: one window after the last window the current count spreads over, one window on
  -- while only previous counts.
  local recovers = n1
  if n3 > 0 then
    recovers = n1 + (ceilDiv(n3, limit) + 1) * W
  elseif n2 > 0 then
    recovers = n1 + W
  end
  retryAfterMs, recoversAt = retry, recovers
  resetAt = t
  if n2 > 0 or n3 > 0 then resetAt = math.max(t, recovers) end

else
  -- gcra.ts: one theoretical arrival time, in units of 1/s ms (scale, interval, tau: above).
  if fresh then
    n1 = t * scale
  elseif worst then
    n1 = t * scale + tau
  end
  local ts = t * scale
  local tat0 = math.max(n1, ts)
  -- charge(): tat moves by units * T from max(tat, now), at most 2 * tau ahead, never before now.
  if units then
    local moved = tat0 + units * interval
    if units > 0 then
      tat0 = math.max(tat0, math.min(moved, ts + 2 * tau))
    else
      tat0 = math.max(ts, moved)
    end
  end
  local newTat = tat0 + c * interval
  allowed = newTat - ts <= tau
  local tat = tat0
  if allowed and commit then tat = newTat end
  remaining = math.max(0, floorDiv(tau - (tat - ts), interval))
  local retry = 0
  if not allowed then retry = ceilDiv(newTat - tau - ts, scale) end
  local recovers = ceilDiv(tat, scale)
  retryAfterMs, resetAt, recoversAt = retry, math.max(t, recovers), recovers
  moreAt = t
  if remaining * interval < tau then moreAt = ceilDiv(tat + (remaining + 1) * interval - tau, scale) end
  n1 = tat
end

-- The state as it stands recovers at: a missing (fresh) one has, at now; a trusted stored one
-- where its kernel's recoversAt() says (on s1, s2, s3). Wanted by a penalty's block (below) and by
-- a stack's refusal (decide-stack-script.ts, which wants it always).
local standing = now
if s1 and (standingWanted or penaltyMode and t < pb) then
  if algorithm == 'token-bucket' then
    standing = s2 + ceilDiv(math.max(0, burst * windowMs - s1), limit)
  elseif algorithm == 'fixed-window' then
    standing = s1
    if s2 > 0 then standing = s1 + ceilDiv(s2, limit) * windowMs end
  elseif algorithm == 'sliding-window-counter' then
    standing = s1
    if s3 > 0 then
      standing = s1 + (ceilDiv(s3, limit) + 1) * windowMs
    elseif s2 > 0 then
      standing = s1 + windowMs
    end
  else
    standing = ceilDiv(s1, scale)
  end
end

-- penalty.ts: blocked (only a trusted stored state can be), the decision above was a look: the
-- algorithm's state stays as stored, the block grows to the penalty after this refusal, and the
-- wait is the block's end or the algorithm's own, whichever is later. Not blocked, a denial
-- starts a block of one window (at least the algorithm's wait); an admission forgets the block.
-- A charge is no refusal: it leaves the block as it is, and while that lasts a cost-1 request is
-- refused until its end (or later, as the quota says).
if penaltyMode then
  if units then
    if t < pb then
      if remaining > 0 then moreAt = pb else moreAt = math.max(pb, moreAt) end
      allowed, remaining, retryAfterMs, resetAt = false, 0, math.max(pb, t + retryAfterMs) - t, math.max(resetAt, pb)
    end
  elseif t < pb then
    local k = math.min(64, pk + 1)
    local block = windowMs
    if penaltyMax then
      block = windowMs * 2 ^ (k - 1)
      if block >= penaltyMax then block = penaltyMax end
    end
    local untilAt = math.max(pb, t + block)
    local endAt = untilAt
    if not allowed then endAt = math.max(untilAt, t + retryAfterMs) end
    -- A unit comes back when the block ends, or later when the quota has none then.
    if allowed or remaining > 0 then moreAt = untilAt else moreAt = math.max(untilAt, moreAt) end
    n1, n2, n3 = s1, s2, s3
    recoversAt = standing
    -- The quota's own full tick as it stands: the look's (nothing taken).
    allowed, remaining, retryAfterMs = false, 0, endAt - t
    resetAt = math.max(endAt, resetAt)
    pb, pk = untilAt, k
  elseif not allowed then
    local untilAt = t + math.max(retryAfterMs, windowMs)
    if remaining > 0 then moreAt = untilAt else moreAt = math.max(untilAt, moreAt) end
    remaining, retryAfterMs, resetAt = 0, untilAt - t, math.max(t, resetAt, untilAt)
    pb, pk = untilAt, 1
  else
    pb, pk = 0, 0
  end
  recoversAt = math.max(recoversAt, pb)
end

-- A refusal takes nothing. From a trusted stored state it only brings the state's clock forward
-- to now (a bucket refilled by whole ticks, a window rolled, gcra's tat lifted to now), which a
-- later decision on the stored state does in the same way, to the same numbers and the same
-- recovery: so the stored state is kept (no write, nothing to replicate) unless a penalty's block
-- changed. The reply still carries the state after the decision. A charge is always written.
local kept = not allowed and not units and not fresh and not worst and pb == sb and pk == sk

-- Expires when fully recovered (the state then equals a fresh one); at least 1 ms.
-- A state kept or left as it was has nothing to write (nor to replicate), and a TTL this script
-- set already ends at its recovery; only a key without one gets it.
-- A trusted stored value is exactly the text written below for its numbers (our fingerprint,
-- single spaces, canonical digits of safe integers: all checked above), so the state is
-- unchanged exactly when its numbers are, and an unchanged one is not even formatted.
if not kept and (fresh or worst or n1 ~= s1 or n2 ~= s2 or n3 ~= s3 or pb ~= sb or pk ~= sk) then
  -- Integers as decimal digits: '%d' (Lua 5.1 casts the double to a C long, 64 bits wherever
  -- Redis runs) is exact for every safe integer, and costs a fraction of '%.0f' (a float
  -- conversion); tostring() keeps only 14 significant digits.
  local value
  if penaltyMode then
    if quotaFields == 1 then
      value = string.format('%s %d %d %d', fingerprint, n1, pb, pk)
    elseif quotaFields == 2 then
      value = string.format('%s %d %d %d %d', fingerprint, n1, n2, pb, pk)
    else
      value = string.format('%s %d %d %d %d %d', fingerprint, n1, n2, n3, pb, pk)
    end
  elseif fields == 1 then
    value = string.format('%s %d', fingerprint, n1)
  elseif fields == 2 then
    value = string.format('%s %d %d', fingerprint, n1, n2)
  else
    value = string.format('%s %d %d %d', fingerprint, n1, n2, n3)
  end
  if testNow then
    redis.call('SET', key, value)
  else
    redis.call('SET', key, value, 'PX', string.format('%d', math.max(1, recoversAt - now)))
  end
elseif not testNow and redis.call('PTTL', key) == -1 then
  redis.call('PEXPIRE', key, string.format('%d', math.max(1, recoversAt - now)))
end

if allowed then
  return { 0, 1, remaining, retryAfterMs, resetAt, now, moreAt }
end
if penaltyMode then
  if quotaFields == 1 then
    return { 0, 0, remaining, retryAfterMs, resetAt, now, moreAt, n1, pb, pk }
  elseif quotaFields == 2 then
    return { 0, 0, remaining, retryAfterMs, resetAt, now, moreAt, n1, n2, pb, pk }
  end
  return { 0, 0, remaining, retryAfterMs, resetAt, now, moreAt, n1, n2, n3, pb, pk }
end
if fields == 1 then
  return { 0, 0, remaining, retryAfterMs, resetAt, now, moreAt, n1 }
elseif fields == 2 then
  return { 0, 0, remaining, retryAfterMs, resetAt, now, moreAt, n1, n2 }
end
return { 0, 0, remaining, retryAfterMs, resetAt, now, moreAt, n1, n2, n3 }
`

/** The script's SHA-1, as `EVALSHA` names it. */
export const DECIDE_SHA = createHash('sha1').update(DECIDE_LUA).digest('hex')
