-- Refund for the sliding log, run as one script: unitlog's refund.lua
-- (refundlog, the sliding log's refund), this part, then slidinglog.lua.
-- This part gives units back, then the decision script, called as a peek
-- through the local ARGV below, reports the state after.
-- KEYS[1]  the subject's sorted set (see slidinglog.lua)
-- ARGV     limit, window ms, 0, now ms (-1: server TIME), units to give
--          back (> 0)
local now = ARGV[4] + 0
if now < 0 then
  local t = redis.call('TIME')
  local us = t[2] + 0
  now = t[1] * 1000 + (us - us % 1000) / 1000
end
refundlog(KEYS[1], ARGV[2] + 0, now, ARGV[5] + 0)
-- the decision script that follows reads this ARGV: a peek at now
local ARGV = {ARGV[1], ARGV[2], 0, now}
