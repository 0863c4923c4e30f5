-- Refund for the sliding window counter, run as the head of one script
-- whose tail is slidingcounter.lua: this part gives units back, then the
-- decision script, called as a peek through the local ARGV below, reports
-- the state after.
-- KEYS[1]  the subject's state (see slidingcounter.lua)
-- ARGV     limit, window ms, 0, now ms (-1: server TIME), units to give
--          back (> 0)
--
-- The current window's count drops by min(units, count). The previous
-- window's count is not touched: its units are weighed, not counted one
-- by one, and the refunded request was recorded in the current window
-- unless the window changed since, in which case it only weighs a share.
-- The key keeps its format and expiry; it is deleted when both counts are 0.
local now = now_ms(ARGV[4])
do
  local window = ARGV[2] + 0
  local r = ARGV[5] + 0
  local elapsed = now % window
  local tag = ((now - elapsed) / window) % 4096
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
    if t == tag and c > 0 then
      r = math.min(r, c)
      if c == r and p == 0 then
        redis.call('DEL', KEYS[1])
      elseif x then
        redis.call('INCRBY', KEYS[1], -r) -- c >= r: no borrow
      else
        redis.call('SET', KEYS[1], tag .. ':' .. (c - r) .. ':' .. p, 'PX', 2 * window - elapsed)
      end
    end
  end
end
-- the decision script that follows reads this ARGV: a peek at now
local ARGV = {ARGV[1], ARGV[2], 0, now}
