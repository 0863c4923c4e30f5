-- Exact sliding window log on one sorted set.
-- KEYS[1]  the subject's sorted set: score = time in ms, member = small integer
-- ARGV     limit, window ms, n (0: peek), member modulus, now ms (-1: server TIME)
-- returns  {allowed, remaining, retry after ms (-1: never), reset after ms}
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local mod = tonumber(ARGV[4])
local now = tonumber(ARGV[5])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
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
  if n == 0 then
    local reset = 0
    if count > 0 then
      local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
      reset = tonumber(newest[2]) + window - now
    end
    return {1, limit - count, 0, reset}
  end
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
  redis.call('PEXPIRE', key, window)
  return {1, limit - count - n, 0, window}
end

-- Denied: the (count + want - limit)-th oldest live entry must leave first.
local k = count + want - limit
local e = redis.call('ZRANGEBYSCORE', key, '(' .. floor, '+inf', 'WITHSCORES', 'LIMIT', k - 1, 1)
local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
return {0, math.max(limit - count, 0), tonumber(e[2]) + window - now, tonumber(newest[2]) + window - now}
