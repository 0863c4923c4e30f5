-- Refund for multilimit, run as one script: unitlog's refund.lua
-- (refundlog, the sliding log's refund), this part, then multilimit.lua.
-- This part gives units back under every rule, then the decision script,
-- called as a peek through the local ARGV below, reports the state after.
-- KEYS[i]  rule i's key (see multilimit.lua)
-- ARGV     0, now ms (-1: server TIME), then per rule: kind, limit, window
--          ms; then the units to give back (> 0)
--
-- Every rule gives back by its own rule, up to the units given back:
-- a sliding log rule its newest live units (as slidinglog's refund: the
-- newest entries whole, then part of the entry where it stops; deleted
-- when no live unit is left), a fixed window rule its current window's
-- count, down to 0. Units that left a rule's window are never given back.
local now = now_ms(ARGV[2])
do
  local give = tonumber(ARGV[3 + 3 * #KEYS])
  for i = 1, #KEYS do
    local a = 2 + (i - 1) * 3
    local key = KEYS[i]
    local window = tonumber(ARGV[a + 3])
    if tonumber(ARGV[a + 1]) == 1 then
      refundlog(key, window, now, give)
    else
      local h = redis.call('HMGET', key, 's', 'c')
      if h[1] and tonumber(h[1]) == now - now % window then
        local c = tonumber(h[2])
        if give >= c then
          redis.call('DEL', key)
        else
          redis.call('HINCRBY', key, 'c', -give) -- keeps the expiry
        end
      end
    end
  end
end
-- the decision script that follows reads this ARGV: a peek at now
local peekArgs = {0, now}
for j = 3, #ARGV do
  peekArgs[j] = ARGV[j]
end
local ARGV = peekArgs
