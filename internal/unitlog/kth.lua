-- The sliding log's sorted set, as the scripts of slidinglog and the
-- sliding log rules of multilimit lay it out (see slidinglog.lua): one
-- entry per recorded request (score: its ms; member: the running count of
-- units, mod M), after a base entry, the newest that left the window.
local M = 2199023255552 -- 2^41 > MaxUnits >= limit >= the units in a log

-- kth returns the rank and the entry {member, score} of key's log holding
-- its k-th oldest live unit: the first entry after the base (at rank
-- brank, member base) whose member is k or more past the base's, by a
-- binary search over ranks, each lookup O(log N); one lookup when the
-- oldest live entry holds it (always so for k = 1). top is the newest
-- entry.
local function kth(key, brank, base, top, k)
  local lo = brank + 1
  local e = redis.call('ZRANGE', key, lo, lo, 'WITHSCORES')
  if (e[1] - base) % M < k then
    -- invariant: the entry at hi holds it, and e is the entry at hi
    local hi = redis.call('ZCARD', key) - 1
    lo, e = lo + 1, top
    while lo < hi do
      local mid = (lo + hi - (lo + hi) % 2) / 2
      local x = redis.call('ZRANGE', key, mid, mid, 'WITHSCORES')
      if (x[1] - base) % M >= k then
        hi, e = mid, x
      else
        lo = mid + 1
      end
    end
  end
  return lo, e
end
