-- GCRA on one stored instant, the theoretical arrival time (TAT), in exact
-- integers (see the package doc).
-- KEYS[1]  the subject's TAT: whole ms, then when digits > 0 the remainder
--          in 1/lp ms, zero-padded to digits digits
-- ARGV     lp, wp (the emission interval in 1/lp ms), capacity in units,
--          n (0: peek), now in ms (-1: server TIME), digits, format of the
--          value when digits > 0 ("%d%0<digits>d")
-- returns  {allowed, remaining, retry after ms (-1: never), reset after ms}
local key = KEYS[1]
local lp = tonumber(ARGV[1])
local wp = tonumber(ARGV[2])
local cap = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local now = tonumber(ARGV[5])
local digits = tonumber(ARGV[6])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local full = cap * wp
-- ahead: how far TAT is after now, in 1/lp ms; 0 once it has passed
local ahead = 0
local v = redis.call('GET', key)
if v then
  local q, r
  if digits == 0 then
    q, r = tonumber(v), 0
  else
    q, r = tonumber(string.sub(v, 1, -digits - 1)), tonumber(string.sub(v, -digits))
  end
  if q and r and q >= now then
    ahead = (q - now) * lp + r
    if ahead > full then
      -- only after a change of limit: never more than an empty bucket
      ahead = full
    end
  end
end

local want = n
if n == 0 then
  want = 1
end
local remaining = math.floor((full - ahead) / wp)
if want > cap then
  return {0, remaining, -1, math.ceil(ahead / lp)}
end
local after = ahead + want * wp
if after > full then
  return {0, remaining, math.ceil((after - full) / lp), math.ceil(ahead / lp)}
end
if n == 0 then
  return {1, remaining, 0, math.ceil(ahead / lp)}
end
local ms = math.floor(after / lp)
local tat = now + ms
if digits > 0 then
  tat = string.format(ARGV[7], tat, after - ms * lp)
end
local reset = math.ceil(after / lp)
redis.call('SET', key, tat, 'PX', reset)
return {1, math.floor((full - after) / wp), 0, reset}
