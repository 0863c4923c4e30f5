-- The sliding log's refund on its sorted set (laid out as in
-- slidinglog.lua), the head of slidinglog's and multilimit's refund
-- scripts: refundlog(key, window, now, r) gives back up to r of the units
-- that still count at now, newest first (after kth.lua): the newest entries whole
-- (ZREMRANGEBYRANK), then the entry where the refund stops keeps its older
-- units (its member drops to base + the units kept). So the layout stays
-- valid (the base entry, strictly increasing scores, running-count
-- members) and RetryAfter stays exact. Entries at or before now - window
-- are never touched: what left the window is not given back. When no live
-- unit is left the key is deleted; otherwise it expires window after its
-- newest entry. Work: a binary search of O(log N) rank lookups, and the
-- removal of the entries given back.
local function refundlog(key, window, now, r)
  local floor = now - window
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if not top[1] then
    return
  end
  -- the base: the newest entry at or before floor (rank 0 when the clock
  -- stepped back before even the base entry); the live units follow it
  local brank = 0
  local b = redis.call('ZREVRANGEBYSCORE', key, floor, '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if b[1] then
    brank = redis.call('ZCOUNT', key, '-inf', floor) - 1
  else
    b = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  end
  local base = b[1] + 0
  if base < 0 then
    base = -1 - base
  end
  local count = (top[1] - base) % M
  if count == 0 then
    return
  end
  local k = count - math.min(r, count) -- the live units kept
  if k == 0 then
    redis.call('DEL', key)
    return
  end
  -- e: the entry holding the k-th live unit, the first after the base
  -- whose member is k or more past the base's; lo its rank
  local lo, e = kth(key, brank, base, top, k)
  redis.call('ZREMRANGEBYRANK', key, lo + 1, -1)
  if (e[1] - base) % M > k then
    redis.call('ZREM', key, e[1])
    redis.call('ZADD', key, e[2], (base + k) % M)
  end
  redis.call('PEXPIRE', key, e[2] + window - now)
end
