-- All-or-nothing multiple limits for one subject: every rule is checked
-- first, without writing; the request's units are recorded in every rule's
-- key only when every rule allows them, so a denial consumes nothing.
-- KEYS[i]  rule i's key; all keys of one call share the subject's hash tag
-- ARGV     n (0: peek), now ms (-1: server TIME),
--          then per rule: kind (1 sliding log, 2 fixed window), limit,
--          window ms, member modulus (sliding log; 0 otherwise)
-- returns  {allowed, then per rule: remaining, retry after ms (-1: never),
--          reset after ms}
--
-- Sliding log key: a sorted set, score = time in ms, member = small integer
-- (see slidinglog.lua). Fixed window key: a hash {s = window start ms,
-- c = units recorded in that window}.
local unpack = table.unpack or unpack -- Lua 5.1 global; newer Lua has table.unpack only
local n = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local want = n
if n == 0 then
  want = 1
end

local rules = {}
local allowed = 1
for i = 1, #KEYS do
  local a = 2 + (i - 1) * 4
  local r = {
    key = KEYS[i],
    kind = tonumber(ARGV[a + 1]),
    limit = tonumber(ARGV[a + 2]),
    window = tonumber(ARGV[a + 3]),
    mod = tonumber(ARGV[a + 4]),
  }
  local limit, window = r.limit, r.window
  if r.kind == 1 then
    -- a unit recorded at t counts while now - t < window
    r.floor = now - window
    r.count = redis.call('ZCOUNT', r.key, '(' .. r.floor, '+inf')
    r.reset = 0
    if r.count > 0 then
      local newest = redis.call('ZRANGE', r.key, -1, -1, 'WITHSCORES')
      r.reset = tonumber(newest[2]) + window - now
    end
    if want > limit then
      r.retry = -1
    elseif r.count + want <= limit then
      r.retry = 0
    else
      -- the (count + want - limit)-th oldest live entry must leave first
      local k = r.count + want - limit
      local e = redis.call('ZRANGEBYSCORE', r.key, '(' .. r.floor, '+inf', 'WITHSCORES', 'LIMIT', k - 1, 1)
      r.retry = tonumber(e[2]) + window - now
    end
  else
    -- windows are aligned to multiples of window since the Unix epoch
    r.start = now - now % window
    r.count = 0
    local h = redis.call('HMGET', r.key, 's', 'c')
    if h[1] and tonumber(h[1]) == r.start then
      r.count = tonumber(h[2])
    end
    r.reset = 0
    if r.count > 0 then
      r.reset = r.start + window - now
    end
    if want > limit then
      r.retry = -1
    elseif r.count + want <= limit then
      r.retry = 0
    else
      r.retry = r.start + window - now
    end
  end
  if r.retry ~= 0 then
    allowed = 0
  end
  rules[i] = r
end

local out = {allowed}
for i, r in ipairs(rules) do
  local remaining = math.max(r.limit - r.count, 0)
  local retry, reset = r.retry, r.reset
  if allowed == 1 and n > 0 then
    remaining = r.limit - r.count - n
    if r.kind == 1 then
      redis.call('ZREMRANGEBYSCORE', r.key, '-inf', r.floor)
      -- Starting from (now + count) keeps a same-millisecond burst
      -- collision-free; NX never overwrites a live entry, so a collision
      -- only moves on to the next candidate.
      local cand = (now + r.count) % r.mod
      local added = 0
      local tried = 0
      while added < n do
        if tried > r.mod + n then
          return redis.error_reply('ratelimit: no free sliding log member')
        end
        local batch = {}
        local b = math.min(n - added, 512)
        for j = 1, b do
          batch[2 * j - 1] = now
          batch[2 * j] = cand
          cand = (cand + 1) % r.mod
        end
        tried = tried + b
        added = added + redis.call('ZADD', r.key, 'NX', unpack(batch))
      end
      reset = math.max(reset, r.window)
      redis.call('PEXPIRE', r.key, reset)
    else
      reset = r.start + r.window - now
      redis.call('HSET', r.key, 's', r.start, 'c', r.count + n)
      redis.call('PEXPIRE', r.key, reset)
    end
  end
  out[#out + 1] = remaining
  out[#out + 1] = retry
  out[#out + 1] = reset
end
return out
