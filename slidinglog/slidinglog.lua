-- Exact sliding window log on one sorted set, one entry per request.
-- KEYS[1]  the subject's sorted set, in score order:
--          the base entry: member -1 - B, score at or before every other;
--          then one entry per recorded request (requests of one ms merged),
--          score = the ms it was recorded at, strictly increasing, member =
--          (B + the units recorded up to and including it) mod 2^41.
--          Units of an entry = its member - the previous entry's (mod 2^41).
-- ARGV     limit, window ms, n (0: peek), now ms (-1: server TIME), and
--          optionally ahead ms (a lease, see package lease): the units are
--          recorded at now + ahead, so they count until now + ahead + window
-- returns  when allowed, reset after ms * (limit + 1) + remaining if that is
--          below 2^53; else {allowed, remaining, retry after ms (-1: never),
--          reset after ms}
--
-- Work, on N entries: when allowed, five to seven commands of O(log N)
-- each, plus the removal of the entries that left the window; when denied,
-- a binary search of O(log N) rank lookups of O(log N) each (one lookup
-- when the oldest live entry holds the unit, always so for n = 1). Never in
-- proportion to n. (ARGV and TIME strings are turned into numbers by
-- arithmetic, which is cheaper than tonumber.)
local key = KEYS[1]
local limit = ARGV[1] + 0
local window = ARGV[2] + 0
local n = ARGV[3] + 0
local now = now_ms(ARGV[4])
local ahead = (ARGV[5] or 0) + 0
-- a unit recorded at t counts while now - t < window
local floor = now - window
local want = math.max(n, 1) -- a peek (n = 0) asks for one unit

-- The newest entry, and the base: the newest entry at or before floor, the
-- base entry itself when no request entry is (found at rank 0 when the
-- clock stepped back before even the base entry). The units after the base
-- are the live ones.
local count, newest, last, base = 0, nil, 0, 0
local bscore, brank, evict = nil, nil, false
local top = redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
if top[1] then
  last = top[1] + 0
  newest = top[2] + 0
  local b = redis.call('ZREVRANGEBYSCORE', key, int(floor), '-inf', 'WITHSCORES', 'LIMIT', '0', '1')
  if not b[1] then
    b = redis.call('ZRANGE', key, '0', '0', 'WITHSCORES')
    brank = 0
  end
  base, bscore = b[1] + 0, b[2]
  if base < 0 then
    base = -1 - base
  else
    evict = true -- a request entry: it and those before it have left
  end
  count = (last - base) % M
end

local reset = count > 0 and newest + window - now or 0 -- until the newest unit leaves

if want > limit then return never(limit, count, reset) end

if count + want <= limit then
  if n > 0 then
    -- recorded at max(now + ahead, newest): the log stays in insertion
    -- order; in the newest entry's ms, merged into it
    local t = now + ahead
    if evict then
      redis.call('ZREMRANGEBYSCORE', key, '-inf', int(floor))
      if count == 0 then
        base, last = 0, 0 -- every entry has left: members start again from 0
      end
    end
    local m = (last + n) % M
    if count > 0 and newest >= t then
      t = newest
      redis.call('ZREM', key, top[1])
    end
    if evict then
      redis.call('ZADD', key, bscore, int(-1 - base), int(t), int(m))
    elseif top[1] then
      redis.call('ZADD', key, int(t), int(m))
    else
      redis.call('ZADD', key, int(floor), '-1', int(t), int(m))
    end
    reset = t + window - now
    if t == now then
      redis.call('PEXPIRE', key, ARGV[2])
    else
      redis.call('PEXPIRE', key, int(reset))
    end
  end
  return allowed(limit, limit - count - n, reset)
end

-- Denied: the entry holding the k-th oldest live unit must leave first:
-- the first entry after the base whose member is k or more past the base's.
-- A binary search over ranks, each lookup O(log N); one lookup when the
-- oldest live entry holds it (always so for n = 1).
local k = count + want - limit
if not brank then
  brank = redis.call('ZCOUNT', key, '-inf', int(floor)) - 1
end
local _, e = kth(key, brank, base, top, k)
return {0, math.max(limit - count, 0), e[2] + window - now, reset}
