-- All-or-nothing multiple limits for one subject: every rule is checked
-- first, without writing; the request's units are recorded in every rule's
-- key only when every rule allows them, so a denial consumes nothing.
-- KEYS[i]  rule i's key; all keys of one call share the subject's hash tag
-- ARGV     n (0: peek), now ms (-1: server TIME),
--          then per rule: kind (1 sliding log, 2 fixed window), limit,
--          window ms
-- returns  {allowed, then per rule: remaining, retry after ms (-1: never),
--          reset after ms}
--
-- Sliding log key: a sorted set laid out as in slidinglog.lua: a base
-- entry (member -1 - B), then one entry per recorded request (requests of
-- one ms merged), score = the ms it was recorded at, strictly increasing,
-- member = (B + the units recorded up to and including it) mod 2^41. Work
-- per rule is O(log N) commands on N entries (plus the evicted ones), and
-- O(log N) rank lookups when it denies; never in proportion to n.
-- Fixed window key: a hash {s = window start ms, c = units recorded in that
-- window}.
local n = tonumber(ARGV[1])
local now = now_ms(ARGV[2])
local want = math.max(n, 1) -- a peek (n = 0) asks for one unit

-- leaves returns the score of the entry of sliding log r holding the k-th
-- oldest live unit: the first entry after the base whose member is k or
-- more past the base's, by a binary search over ranks.
local function leaves(r, k)
  if not r.brank then
    r.brank = redis.call('ZCOUNT', r.key, '-inf', r.floor) - 1
  end
  local _, e = kth(r.key, r.brank, r.base, r.top, k)
  return e[2] + 0
end

local rules = {}
local allowed = 1
for i = 1, #KEYS do
  local a = 2 + (i - 1) * 3
  local r = {
    key = KEYS[i],
    kind = tonumber(ARGV[a + 1]),
    limit = tonumber(ARGV[a + 2]),
    window = tonumber(ARGV[a + 3]),
  }
  local limit, window = r.limit, r.window
  if r.kind == 1 then
    -- a unit recorded at t counts while now - t < window; the live units
    -- are those after the base: the newest entry at or before floor (the
    -- base entry when no request entry is; rank 0 when the clock stepped
    -- back before even that)
    r.floor = now - window
    r.count, r.last, r.base, r.evict = 0, 0, 0, false
    r.top = redis.call('ZRANGE', r.key, -1, -1, 'WITHSCORES')
    if r.top[1] then
      r.last = r.top[1] + 0
      r.newest = r.top[2] + 0
      local b = redis.call('ZREVRANGEBYSCORE', r.key, r.floor, '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
      if not b[1] then
        b = redis.call('ZRANGE', r.key, 0, 0, 'WITHSCORES')
        r.brank = 0
      end
      r.base, r.bscore = b[1] + 0, b[2]
      if r.base < 0 then
        r.base = -1 - r.base
      else
        r.evict = true -- a request entry: it and those before it have left
      end
      r.count = (r.last - r.base) % M
    end
    r.reset = 0
    if r.count > 0 then
      r.reset = r.newest + window - now
    end
    if want > limit then
      r.retry = -1
    elseif r.count + want <= limit then
      r.retry = 0
    else
      r.retry = leaves(r, r.count + want - limit) + window - now
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
      -- recorded at max(now, newest): the log stays in insertion order; in
      -- the newest entry's ms, merged into it
      local t = now
      if r.evict then
        redis.call('ZREMRANGEBYSCORE', r.key, '-inf', r.floor)
        if r.count == 0 then
          r.base, r.last = 0, 0 -- every entry has left: members start again from 0
        end
      end
      local m = (r.last + n) % M
      if r.count > 0 and r.newest >= now then
        t = r.newest
        redis.call('ZREM', r.key, r.top[1])
      end
      if r.evict then
        redis.call('ZADD', r.key, r.bscore, -1 - r.base, t, m)
      elseif r.top[1] then
        redis.call('ZADD', r.key, t, m)
      else
        redis.call('ZADD', r.key, r.floor, -1, t, m)
      end
      reset = t + r.window - now
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
