-- Token bucket in one hash, in exact integers (see the package doc).
-- KEYS[1]  the subject's hash: t = tokens x wp, l = last refill in ms
-- ARGV     lp (units refilled per ms), wp (units per token), capacity in
--          tokens, n (0: peek), now in ms (-1: server TIME)
-- returns  {allowed, remaining, retry after ms (-1: never), reset after ms}
local key = KEYS[1]
local lp = tonumber(ARGV[1])
local wp = tonumber(ARGV[2])
local cap = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local now = tonumber(ARGV[5])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
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
if n == 0 then
  return {1, remaining, 0, math.ceil((full - tokens) / lp)}
end
tokens = tokens - need
local reset = math.ceil((full - tokens) / lp)
redis.call('HSET', key, 't', tokens, 'l', last)
redis.call('PEXPIRE', key, reset)
return {1, math.floor(tokens / wp), 0, reset}
