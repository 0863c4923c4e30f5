-- Exact sliding window log on one sorted set.
-- KEYS[1]  the subject's sorted set: score = time in ms, member = small integer
-- ARGV     limit, window ms, n (0: peek), member modulus, now ms (-1: server TIME)
-- returns  when allowed, reset after ms * (limit + 1) + remaining if that is
--          below 2^53; else {allowed, remaining, retry after ms (-1: never),
--          reset after ms}
--
-- (ARGV and TIME strings are turned into numbers by arithmetic, which is
-- cheaper than tonumber.)
local unpack = table.unpack or unpack -- Lua 5.1 global; newer Lua has table.unpack only
local key = KEYS[1]
local limit = ARGV[1] + 0
local window = ARGV[2] + 0
local n = ARGV[3] + 0
local mod = ARGV[4] + 0
local now = ARGV[5] + 0
if now < 0 then
  local t = redis.call('TIME')
  local us = t[2] + 0
  now = t[1] * 1000 + (us - us % 1000) / 1000
end
-- a unit recorded at t counts while now - t < window
local floor = now - window

local count
local want = n
if n == 0 then
  want = 1
  count = redis.call('ZCOUNT', key, '(' .. floor, '+inf')
else
  redis.call('ZREMRANGEBYSCORE', key, '-inf', floor)
  count = redis.call('ZCARD', key)
end

if want > limit then
  local reset = 0
  if count > 0 then
    local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    reset = tonumber(newest[2]) + window - now
  end
  return {0, math.max(limit - count, 0), -1, reset}
end

if count + want <= limit then
  local reset = window
  if n == 0 then
    reset = 0
    if count > 0 then
      local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
      reset = newest[2] + window - now
    end
  else
    -- Members are small integers, cheap in a listpack. Starting from
    -- (now + count) keeps a same-millisecond burst collision-free; NX never
    -- overwrites a live entry, so a collision only moves on to the next
    -- candidate, and at most limit of the mod candidates are live.
    local cand = (now + count) % mod
    local added = 0
    local tried = 0
    while added < n do
      if tried > mod + n then
        return redis.error_reply('ratelimit: no free sliding log member')
      end
      local batch = {}
      local b = math.min(n - added, 512)
      for j = 1, b do
        batch[2 * j - 1] = now
        batch[2 * j] = cand
        cand = (cand + 1) % mod
      end
      tried = tried + b
      added = added + redis.call('ZADD', key, 'NX', unpack(batch))
    end
    redis.call('PEXPIRE', key, ARGV[2])
  end
  local remaining = limit - count - n
  local x = reset * (limit + 1) + remaining
  if x < 9007199254740992 then
    return x
  end
  return {1, remaining, 0, reset}
end

-- Denied: the (count + want - limit)-th oldest live entry must leave first.
local k = count + want - limit
local e = redis.call('ZRANGEBYSCORE', key, '(' .. floor, '+inf', 'WITHSCORES', 'LIMIT', k - 1, 1)
local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
return {0, math.max(limit - count, 0), tonumber(e[2]) + window - now, tonumber(newest[2]) + window - now}
