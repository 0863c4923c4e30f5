-- Token bucket in one hash, in exact integers (see the package doc).
-- KEYS[1]  the subject's hash: t = tokens x wp, l = last refill in ms
-- ARGV     lp (units refilled per ms), wp (units per token), capacity in
--          tokens, n (0: peek), now in ms (-1: server TIME)
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
if now < 0 then
  local t = redis.call('TIME')
  local us = t[2] + 0
  now = t[1] * 1000 + (us - us % 1000) / 1000
end
local full = cap * wp
local tokens = full
local last = now
local s = redis.call('HMGET', key, 't', 'l')
if s[1] then
  tokens = tonumber(s[1])
  last = tonumber(s[2])
  if now > last then
    -- a huge product is inexact but then above full, which is exact
    tokens = tokens + (now - last) * lp
    last = now
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
  redis.call('HSET', key, 't', tokens, 'l', last)
  redis.call('PEXPIRE', key, reset)
end
local x = reset * (cap + 1) + remaining
if x < 9007199254740992 then
  return x
end
return {1, remaining, 0, reset}
