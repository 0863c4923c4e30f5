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
local now = now_ms(ARGV[5])
local full = cap * wp
