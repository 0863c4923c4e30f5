-- Refund for the token bucket, between internal/exact's head.lua and the
-- decision (tokenbucket.lua, then decide.lua) in one script: this part
-- gives tokens back, then the decision, a peek (n is 0), reports the state
-- after.
-- KEYS[1]  the subject's hash (see tokenbucket.lua)
-- ARGV     as tokenbucket.lua's (lp, wp, capacity, 0, now, own lp, wp,
--          capacity, window), then the tokens to give back (> 0)
--
-- The bucket is refilled to now, then tokens = min(capacity, tokens + n):
-- never above capacity. A bucket that is full again is deleted (a missing
-- key is a full bucket); otherwise it expires when it would be full.
do
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
