import { createHash } from 'node:crypto'

/**
 * The Redis backend's only script: one rate-limit decision on one key, atomically. Its source is
 * kept here, as a string in a TypeScript module, so that the built package carries it with no file
 * to locate at run time (tsup bundles this module like any other). One script serves the four
 * algorithms: the parts they share (time, policy check, storage, TTL, reply) are written once, and
 * there is one SHA to load and one NOSCRIPT fallback.
 *
 * Each algorithm below is a line-by-line twin of its TypeScript kernel in `lib/core/rates/`
 * (same operations in the same order, so the same doubles come out); the differential test in
 * `test/redis/` holds them to that. Any edit to this text changes `DECIDE_SHA`, which a test pins,
 * so a change to the script is always a deliberate one.
 */
export const DECIDE_LUA = `-- fastify-admission: one rate-limit decision on one key, atomically.
--
-- KEYS[1]  the state of one identity under one limiter: <prefix>{<address>:<identity>}
-- ARGV[1]  the policy fingerprint "<algorithm>:<limit>:<windowMs>[:<burst>]" (policyFingerprint())
-- ARGV[2]  the cost: a positive integer, at most the policy's capacity (the caller checks it)
-- ARGV[3]  TESTS ONLY, never sent by the backend in production: the time to decide at, in epoch ms,
--          instead of the server's TIME. Key expiry runs on the server's real clock, which a test
--          time does not follow, so with ARGV[3] the state is stored without a TTL (the test deletes
--          it). Expiry changes no decision anyway: a key expires once its state has fully
--          recovered, and a fully recovered state decides exactly like a missing (fresh) one.
--
-- Stored value: one string, "<fingerprint> <n1> <n2> [<n3>]", the kernel's state fields in the
-- order of its write(): token-bucket "tokens last", fixed-window "start count",
-- sliding-window-counter "start previous current", gcra "tat". A key whose fingerprint differs
-- from ARGV[1] is never reset or rewritten: the script answers with a conflict.
--
-- Reply, integers only (Redis truncates a Lua number to an integer reply; every value here is one):
--   {0, allowed (1|0), remaining, retryAfterMs, resetAt, now}    allowed
--   {0, 0, remaining, retryAfterMs, resetAt, now, n1, n2[, n3]}  denied, with the state after it
--   {1, stored fingerprint}                                       the key holds another policy
--   {2}                                                           unreadable state, same fingerprint
--
-- Arithmetic: Lua numbers are doubles, as in JavaScript. Policy validation keeps every value the
-- kernels handle a safe integer (< 2^53), so sums, differences and products are exact; floorDiv
-- and ceilDiv are exact as in arithmetic.ts (math.fmod is C's fmod, exact like JavaScript's %,
-- whereas Lua's own % is a - floor(a/b)*b and rounds). Where a kernel writes Math.floor(a / b),
-- the script writes math.floor(a / b): the same rounded division, then the same floor.

local key = KEYS[1]
local fingerprint = ARGV[1]
local cost = tonumber(ARGV[2])
local testNow = ARGV[3]

local algorithm, limitText, windowText, burstText = string.match(fingerprint, '^([a-z-]+):(%d+):(%d+):?(%d*)$')
if not algorithm or not cost then
  return redis.error_reply('fastify-admission: bad arguments')
end
local limit = tonumber(limitText)
local windowMs = tonumber(windowText)
local burst = limit
if burstText ~= '' then burst = tonumber(burstText) end

local now
if testNow then
  now = tonumber(testNow)
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- arithmetic.ts
local function floorDiv(a, b)
  local r = math.fmod(math.fmod(a, b) + b, b)
  return (a - r) / b
end

local function ceilDiv(a, b)
  return -floorDiv(-a, b)
end

local function windowStart(t, w)
  return math.floor(t / w) * w
end

-- Each algorithm: fields (numbers per state), fresh(now) -> state, and
-- decide(state, now, cost) -> allowed, remaining, retryAfterMs, resetAt, next state, recoversAt.
local kernels = {}

-- token-bucket.ts on bucket.ts take(): units of 1/windowMs of a token, capacity burst * windowMs,
-- limit units a tick (interval 1), a cost c takes c * windowMs units.
kernels['token-bucket'] = {
  fields = 2,
  fresh = function(t)
    return { burst * windowMs, t }
  end,
  decide = function(s, t, c)
    local capacity = burst * windowMs
    local units = c * windowMs
    -- take(): refill whole ticks only; a clock that stepped back refills nothing; a stored state
    -- above capacity is capped. steps * limit may leave the safe range: the cap keeps it exact.
    local tokens = math.min(capacity, s[1])
    local last = s[2]
    if t > last then
      local steps = math.floor((t - last) / 1)
      if steps > 0 then
        tokens = math.min(capacity, tokens + steps * limit)
        last = last + steps * 1
      end
    end
    local allowed = tokens >= units
    local retry = 0
    if allowed then
      tokens = tokens - units
    else
      -- take()'s wait counts from last; a clock that stepped back waits for the gap too.
      retry = math.ceil(((units - tokens) * 1) / limit) + (last - t)
    end
    -- fullAt(): nothing refills before last, then limit units a tick.
    local full = last + ceilDiv(math.max(0, capacity - tokens), limit)
    return allowed, floorDiv(tokens, windowMs), retry, full, { tokens, last }, full
  end
}

-- fixed-window.ts: windows aligned to multiples of windowMs; roll forward only.
local function fixedRecovers(s)
  if s[2] > 0 then return s[1] + windowMs end
  return s[1]
end

kernels['fixed-window'] = {
  fields = 2,
  fresh = function(t)
    return { windowStart(t, windowMs), 0 }
  end,
  decide = function(s, t, c)
    local current = windowStart(t, windowMs)
    local rolled = s
    if current > s[1] then rolled = { current, 0 } end
    local allowed = rolled[2] + c <= limit
    local nxt = rolled
    if allowed then nxt = { rolled[1], rolled[2] + c } end
    local retry = 0
    if not allowed then retry = nxt[1] + windowMs - t end
    local recovers = fixedRecovers(nxt)
    return allowed, limit - nxt[2], retry, math.max(t, recovers), nxt, recovers
  end
}

-- sliding-window-counter.ts: the estimate previous * (W - e) / W + current, multiplied by W.
local function slidingRecovers(s)
  if s[3] > 0 then return s[1] + 2 * windowMs end
  if s[2] > 0 then return s[1] + windowMs end
  return s[1]
end

kernels['sliding-window-counter'] = {
  fields = 3,
  fresh = function(t)
    return { windowStart(t, windowMs), 0, 0 }
  end,
  decide = function(s, t, c)
    local W = windowMs
    -- roll(): forward only; one window on, current becomes previous; further on, both are gone.
    local start = windowStart(t, W)
    local rolled
    if start <= s[1] then
      rolled = s
    elseif start == s[1] + W then
      rolled = { start, s[3], 0 }
    else
      rolled = { start, 0, 0 }
    end
    start = rolled[1]
    local p = rolled[2]
    local cur = rolled[3]
    local e = math.max(0, t - start)
    local room = limit - cur - c
    local allowed = p * (W - e) <= room * W
    local nxt = rolled
    if allowed then nxt = { start, p, cur + c } end
    local remaining = math.max(0, limit - ceilDiv(p * (W - e), W) - nxt[3])
    local retry = 0
    if not allowed then
      local untilNext = start + W - t
      if room >= 0 then
        retry = untilNext - floorDiv(room * W, p)
      else
        retry = untilNext + ceilDiv(-room * W, cur)
      end
    end
    local recovers = slidingRecovers(nxt)
    return allowed, remaining, retry, math.max(t, recovers), nxt, recovers
  end
}

-- gcra.ts: one theoretical arrival time, in units of 1/s ms, s = limit / gcd(limit, windowMs).
local g = limit
local b = windowMs
while b ~= 0 do
  g, b = b, math.fmod(g, b)
end
local scale = limit / g
local interval = windowMs / g

kernels['gcra'] = {
  fields = 1,
  fresh = function(t)
    return { t * scale }
  end,
  decide = function(s, t, c)
    local tau = burst * interval
    local ts = t * scale
    local tat0 = math.max(s[1], ts)
    local newTat = tat0 + c * interval
    local allowed = newTat - ts <= tau
    local tat = tat0
    if allowed then tat = newTat end
    local remaining = math.max(0, floorDiv(tau - (tat - ts), interval))
    local retry = 0
    if not allowed then retry = ceilDiv(newTat - tau - ts, scale) end
    local recovers = ceilDiv(tat, scale)
    return allowed, remaining, retry, math.max(t, recovers), { tat }, recovers
  end
}

local kernel = kernels[algorithm]
if not kernel then
  return redis.error_reply('fastify-admission: unknown algorithm ' .. algorithm)
end

-- The stored state, checked against the caller's policy.
local stored = redis.call('GET', key)
local state
if stored then
  local storedFingerprint, rest = string.match(stored, '^(%S*)(.*)$')
  if storedFingerprint ~= fingerprint then
    return { 1, storedFingerprint }
  end
  state = {}
  for field in string.gmatch(rest, '%S+') do
    state[#state + 1] = tonumber(field)
  end
  if #state ~= kernel.fields then
    return { 2 }
  end
  for i = 1, kernel.fields do
    if not state[i] then return { 2 } end
  end
else
  state = kernel.fresh(now)
end

local allowed, remaining, retryAfterMs, resetAt, nxt, recoversAt = kernel.decide(state, now, cost)

-- Integers as decimal digits: '%.0f' is exact for every integer double (tostring() keeps only 14
-- significant digits).
local value = fingerprint
for i = 1, kernel.fields do
  value = value .. ' ' .. string.format('%.0f', nxt[i])
end
-- A denial often leaves the state as it was: then there is nothing to write (nor to replicate),
-- and the TTL already ends at the same recoversAt.
if value ~= stored then
  if testNow then
    redis.call('SET', key, value)
  else
    -- Expires when fully recovered (the state then equals a fresh one); at least 1 ms.
    redis.call('SET', key, value, 'PX', string.format('%.0f', math.max(1, recoversAt - now)))
  end
end

if allowed then
  return { 0, 1, remaining, retryAfterMs, resetAt, now }
end
local reply = { 0, 0, remaining, retryAfterMs, resetAt, now }
for i = 1, kernel.fields do
  reply[6 + i] = nxt[i]
end
return reply
`

/** The script's SHA-1, as `EVALSHA` names it. */
export const DECIDE_SHA = createHash('sha1').update(DECIDE_LUA).digest('hex')
