-- Refund for GCRA, between internal/exact's head.lua and the decision
-- (gcra.lua, then decide.lua) in one script: this part moves the TAT back,
-- then the decision, a peek (n is 0), reports the state after.
-- KEYS[1]  the subject's TAT (see gcra.lua)
-- ARGV     as gcra.lua's (lp, wp, capacity, 0, now, digits, format, own
--          lp and wp, window), then the units to give back (> 0)
--
-- TAT = max(now, TAT - n emission intervals): never earlier than now, so
-- a subject never holds more than its capacity. A TAT that reaches now is
-- deleted (a missing key is a TAT long passed); otherwise the key expires
-- at the new TAT.
do
  local digits = ARGV[6] + 0
  local v = redis.call('GET', key)
  -- a TAT written under another limit (a tier: "ms,remainder,lp,wp") is
  -- left as it is
  if v and not string.find(v, ',', 1, true) then
    local q, r
    if digits == 0 then
      q, r = tonumber(v), 0
    else
      q, r = tonumber(string.sub(v, 1, -digits - 1)), tonumber(string.sub(v, -digits))
    end
    -- from the stored TAT, not capped at an empty bucket from now: a
    -- refund whose clock is behind the last decision's gives back n units
    -- and no more; a TAT more than two capacities after now (a huge
    -- product is inexact but then above that) is left as it is
    local ahead = 0
    if q and r and q >= now then
      ahead = (q - now) * lp + r
    end
    if ahead > 0 and ahead <= 2 * full then
      ahead = ahead - ARGV[11] * wp
      if ahead <= 0 then
        redis.call('DEL', key)
      else
        local ms = math.floor(ahead / lp)
        local tat = now + ms
        if digits > 0 then
          tat = string.format(ARGV[7], tat, ahead - ms * lp)
        end
        redis.call('SET', key, tat, 'PX', math.ceil(ahead / lp))
      end
    end
  end
end
