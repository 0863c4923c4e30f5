-- Fixed window counter in one integer.
-- KEYS[1]  the subject's counter: (window index mod 4096) * 2^41 + units
--          counted in that window; it expires when the window ends
-- ARGV     limit, window ms, n (0: peek), now ms (-1: server TIME)
-- returns  when allowed, reset after ms * (limit + 1) + remaining if that is
--          below 2^53; else {allowed, remaining, retry after ms (-1: never),
--          reset after ms}
--
-- Every value is an integer below 2^53, so float arithmetic is exact. (ARGV
-- and TIME strings are turned into numbers by arithmetic, which is cheaper
-- than tonumber.)
local limit = ARGV[1] + 0
local window = ARGV[2] + 0
local n = ARGV[3] + 0
local now = now_ms(ARGV[4])
-- windows are aligned to multiples of window since the Unix epoch
local elapsed = now % window
local left = window - elapsed -- ms until the window ends, >= 1
local base = ((now - elapsed) / window % 4096) * 2199023255552 -- 2^41 > any count
local count = 0
local v = tonumber(redis.call('GET', KEYS[1]))
if v and v >= base and v < base + 2199023255552 then
  count = v - base
end

local want = math.max(n, 1) -- a peek (n = 0) asks for one unit
if want > limit then
  return never(limit, count, count > 0 and left or 0)
end
if count + want > limit then
  return {0, math.max(limit - count, 0), left, left}
end
local reset = left
if n == 0 then
  if count == 0 then
    reset = 0
  end
elseif count > 0 then
  -- this window's counter: it already expires when the window ends
  redis.call('INCRBY', KEYS[1], ARGV[3])
else
  redis.call('SET', KEYS[1], int(base + n), 'PX', int(left))
end
return allowed(limit, limit - count - n, reset)
