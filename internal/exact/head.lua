-- The head of every script of the token bucket and GCRA (see exact.Spec):
-- the ARGV they share, the time, and a capacity in scaled units.
-- KEYS[1]  the subject's key
-- ARGV     lp, wp (a unit of the limit is wp scaled units, and every ms
--          gives lp back), capacity in units, n (0: peek), now in ms (-1:
--          server TIME), then what the algorithm reads of the strategy's
--          own limit
--
-- (ARGV and TIME strings are turned into numbers by arithmetic, which is
-- cheaper than tonumber.)
local key = KEYS[1]
local lp = ARGV[1] + 0
local wp = ARGV[2] + 0
local cap = ARGV[3] + 0
local n = ARGV[4] + 0
local now = ARGV[5] + 0
if now < 0 then
  local t = redis.call('TIME')
  local us = t[2] + 0
  now = t[1] * 1000 + (us - us % 1000) / 1000
end
local full = cap * wp
