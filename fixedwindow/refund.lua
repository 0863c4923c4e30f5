-- Refund for the fixed window, run as the head of one script whose tail is
-- fixedwindow.lua: this part gives units back, then the decision script,
-- called as a peek through the local ARGV below, reports the state after.
-- KEYS[1]  the subject's counter (see fixedwindow.lua)
-- ARGV     limit, window ms, 0, now ms (-1: server TIME), units to give
--          back (> 0)
--
-- The current window's count drops by min(units, count): a count of an
-- earlier window is not touched (its units no longer count). The counter
-- keeps its expiry, the end of the window; it is deleted at 0.
local now = now_ms(ARGV[4])
do
  local window = ARGV[2] + 0
  local r = ARGV[5] + 0
  local elapsed = now % window
  local base = ((now - elapsed) / window % 4096) * 2199023255552
  local v = tonumber(redis.call('GET', KEYS[1]))
  if v and v >= base and v < base + 2199023255552 then
    local count = v - base
    if r >= count then
      redis.call('DEL', KEYS[1])
    else
      redis.call('INCRBY', KEYS[1], -r)
    end
  end
end
-- the decision script that follows reads this ARGV: a peek at now
local ARGV = {ARGV[1], ARGV[2], 0, now}
