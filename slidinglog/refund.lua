-- Refund for the sliding log, run as one script: unitlog's refund.lua
-- (refundlog, the sliding log's refund), this part, then slidinglog.lua.
-- This part gives units back, then the decision script, called as a peek
-- through the local ARGV below, reports the state after.
-- KEYS[1]  the subject's sorted set (see slidinglog.lua)
-- ARGV     limit, window ms, 0, now ms (-1: server TIME), units to give
--          back (> 0)
local now = now_ms(ARGV[4])
refundlog(KEYS[1], ARGV[2] + 0, now, ARGV[5] + 0)
-- the decision script that follows reads this ARGV: a peek at now
local ARGV = {ARGV[1], ARGV[2], 0, now}
