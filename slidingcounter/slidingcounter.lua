-- Sliding window counter in one key: the count of the current window and of
-- the window before, tagged with the current window's index mod 4096.
-- KEYS[1]  the subject's state, either an integer
--            tag * 2^40 + prev * 2^20 + curr   (written when limit < 2^20)
--          or a string "<tag>:<curr>:<prev>" (written for larger limits);
--          both are read whatever the limit
-- ARGV     limit, window ms, n (0: peek), now ms (-1: server TIME)
-- returns  when allowed, reset after ms * (limit + 1) + remaining if that is
--          below 2^53; else {allowed, remaining, retry after ms (-1: never),
--          reset after ms}
--
-- The estimate of the units in (now - window, now] is
--   used = curr + ceil(prev * (window - elapsed) / window)
-- in whole units. The constructor ensures limit * window <= 2^52, so every
-- product and sum below is an integer under 2^53 and exact, and so is
-- math.floor(a / b) for a >= 0, a + b <= 2^53. (ARGV and TIME strings are
-- turned into numbers by arithmetic, which is cheaper than tonumber.)
local limit = ARGV[1] + 0
local window = ARGV[2] + 0
local n = ARGV[3] + 0
local now = now_ms(ARGV[4])
local elapsed = now % window
local idx = (now - elapsed) / window
local tag = idx % 4096
local curr, prev = 0, 0
local inplace = false -- the key holds this window's integer: INCRBY it
local v = redis.call('GET', KEYS[1])
if v then
  local t, c, p
  local x = tonumber(v)
  if x then
    c = x % 1048576
    x = (x - c) / 1048576
    p = x % 1048576
    t = (x - p) / 1048576
  else
    t, c, p = string.match(v, '^(%d+):(%d+):(%d+)$')
    if t then
      t, c, p = t + 0, c + 0, p + 0
    end
  end
  if t == tag then
    curr, prev = c, p
    inplace = x ~= nil
  elseif t == (idx - 1) % 4096 then
    prev = c
  end
end
-- counts above the limit (it was lowered, or a per-call limit is lower)
-- weigh as a full window; the previous window's count is kept as it is
local rawprev = prev
curr = math.min(curr, limit)
prev = math.min(prev, limit)

local used = curr + math.floor((prev * (window - elapsed) + window - 1) / window)
local reset = 0
if curr > 0 then
  reset = 2 * window - elapsed
elseif prev > 0 then
  reset = window - elapsed
end
local want = math.max(n, 1) -- a peek (n = 0) asks for one unit
if want > limit then return never(limit, used, reset) end
if used + want <= limit then
  if n > 0 then
    reset = 2 * window - elapsed
    if inplace and limit < 1048576 then
      -- curr + n <= limit < 2^20: no carry; the key already expires when
      -- the next window ends
      redis.call('INCRBY', KEYS[1], ARGV[3])
    elseif limit < 1048576 and rawprev < 1048576 then
      redis.call('SET', KEYS[1], int((tag * 1048576 + rawprev) * 1048576 + curr + n), 'PX', int(reset))
    else
      redis.call('SET', KEYS[1], format('%d:%d:%d', tag, curr + n, rawprev), 'PX', int(reset))
    end
  end
  return allowed(limit, limit - used - n, reset)
end

-- Denied: the earliest ms at which the request passes if nothing else is
-- recorded (used never grows while nothing is recorded).
local retry
local r = limit - curr - want
if r >= 0 then
  -- in this window, once prev's weight has fallen to r (prev > 0 here);
  -- r = 0 lands on the next window's first ms
  retry = window - math.floor(r * window / prev) - elapsed
else
  -- in the next window, where this window's count weighs as prev
  retry = 2 * window - math.floor((limit - want) * window / curr) - elapsed
end
return {0, math.max(limit - used, 0), retry, reset}
