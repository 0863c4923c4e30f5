-- The decision of the token bucket and GCRA (exact.Decide), the tail of
-- their scripts: n units (0: peek) for a subject that used `used` scaled
-- units (at most full). An allowed request of n > 0 calls store(after,
-- reset): the units used after it, and the ms until they are all back.
-- returns  when allowed, reset after ms * (capacity + 1) + remaining if that
--          is below 2^53; else {allowed, remaining, retry after ms (-1:
--          never), reset after ms}
local want = math.max(n, 1)
local remaining = math.floor((full - used) / wp)
local reset = math.ceil(used / lp)
if want > cap then
  return {0, remaining, -1, reset}
end
local after = used + want * wp
if after > full then
  return {0, remaining, math.ceil((after - full) / lp), reset}
end
if n > 0 then
  remaining = math.floor((full - after) / wp)
  reset = math.ceil(after / lp)
  store(after, reset)
end
return allowed(cap, remaining, reset)
