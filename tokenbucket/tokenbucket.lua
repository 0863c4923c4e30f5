-- Token bucket in one hash, in exact integers (see the package doc).
-- KEYS[1]  the subject's hash: t = tokens x wp, l = last refill in ms; and
--          when the last write was under a per-call limit other than the
--          strategy's, p, w, c: that limit's lp, wp and capacity (t's scale)
-- ARGV     lp (units refilled per ms), wp (units per token), capacity in
--          tokens, n (0: peek), now in ms (-1: server TIME), then the
--          strategy's own lp, wp and capacity (the scale of a hash without
--          p, w, c), and the window in ms
-- returns  when allowed, reset after ms * (capacity + 1) + remaining if that
--          is below 2^53; else {allowed, remaining, retry after ms (-1:
--          never), reset after ms}
--
-- (ARGV and TIME strings are turned into numbers by arithmetic, which is
-- cheaper than tonumber.)
local key = KEYS[1]
local lp = ARGV[1] + 0
local wp = ARGV[2] + 0
local cap = ARGV[3] + 0
local n = ARGV[4] + 0
local now = ARGV[5] + 0
local dlp, dwp, dcap = ARGV[6] + 0, ARGV[7] + 0, ARGV[8] + 0
local window = ARGV[9] + 0
if now < 0 then
  local t = redis.call('TIME')
  local us = t[2] + 0
  now = t[1] * 1000 + (us - us % 1000) / 1000
end
local full = cap * wp
local tokens = full
local last = now
local s = redis.call('HMGET', key, 't', 'l', 'p', 'w', 'c')
if s[1] then
  tokens = tonumber(s[1])
  last = tonumber(s[2])
  -- the scale and rate of the stored tokens
  local olp, owp, ocap = dlp, dwp, dcap
  if s[3] then
    olp, owp, ocap = tonumber(s[3]), tonumber(s[4]), tonumber(s[5])
  end
  local ofull = ocap * owp
  if now > last then
    -- a huge product is inexact but then above full, which is exact
    tokens = tokens + (now - last) * olp
    last = now
  end
  if owp ~= wp or ocap ~= cap then
    -- another limit than the last write's: the units used carry over
    -- (exact.Carry), up to an empty bucket
    local d = ofull - tokens
    if d <= 0 then
      tokens = full
    elseif math.floor(d / owp) >= cap then
      tokens = 0
    else
      tokens = full - math.min(math.ceil(d * (window / owp) / (window / wp)), full)
    end
  end
  if tokens >= full then
    -- a full bucket has no refill time to remember
    tokens = full
    last = now
  end
end

local want = n
if n == 0 then
  want = 1
end
local remaining = math.floor(tokens / wp)
if want > cap then
  return {0, remaining, -1, math.ceil((full - tokens) / lp)}
end
local need = want * wp
if need > tokens then
  return {0, remaining, math.ceil((need - tokens) / lp), math.ceil((full - tokens) / lp)}
end
if n > 0 then
  tokens = tokens - need
  remaining = math.floor(tokens / wp)
end
local reset = math.ceil((full - tokens) / lp)
if n > 0 then
  if lp == dlp and wp == dwp and cap == dcap then
    redis.call('HSET', key, 't', tokens, 'l', last)
    if s[3] then
      redis.call('HDEL', key, 'p', 'w', 'c')
    end
  else
    redis.call('HSET', key, 't', tokens, 'l', last, 'p', lp, 'w', wp, 'c', cap)
  end
  redis.call('PEXPIRE', key, reset)
end
local x = reset * (cap + 1) + remaining
if x < 9007199254740992 then
  return x
end
return {1, remaining, 0, reset}
