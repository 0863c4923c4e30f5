-- Refund for the token bucket, run as the head of one script whose tail is
-- tokenbucket.lua: this part gives tokens back, then the decision script,
-- called as a peek through the local ARGV below, reports the state after.
-- KEYS[1]  the subject's hash (see tokenbucket.lua)
-- ARGV     as tokenbucket.lua's (lp, wp, capacity, 0, now, own lp, wp,
--          capacity, window), then the tokens to give back (> 0)
--
-- The bucket is refilled to now, then tokens = min(capacity, tokens + n):
-- never above capacity. A bucket that is full again is deleted (a missing
-- key is a full bucket); otherwise it expires when it would be full.
local now = ARGV[5] + 0
if now < 0 then
  local t = redis.call('TIME')
  local us = t[2] + 0
  now = t[1] * 1000 + (us - us % 1000) / 1000
end
do
  local key = KEYS[1]
  local lp = ARGV[1] + 0
  local wp = ARGV[2] + 0
  local full = ARGV[3] * wp
  local s = redis.call('HMGET', key, 't', 'l', 'p')
  -- a bucket written under another limit (a tier, field p) is left as it is
  if s[1] and not s[3] then
    local tokens = tonumber(s[1])
    local last = tonumber(s[2])
    if now > last then
      tokens = tokens + (now - last) * lp
      last = now
    end
    -- a huge sum is inexact but then above full, which is exact
    tokens = tokens + ARGV[10] * wp
    if tokens >= full then
      redis.call('DEL', key)
    else
      redis.call('HSET', key, 't', tokens, 'l', last)
      redis.call('PEXPIRE', key, math.ceil((full - tokens) / lp))
    end
  end
end
-- the decision script that follows reads this ARGV: a peek at now
local ARGV = {ARGV[1], ARGV[2], ARGV[3], 0, now, ARGV[6], ARGV[7], ARGV[8], ARGV[9]}
