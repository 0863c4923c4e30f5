-- Exact sliding window log in one compact string: a ring of fixed-width times.
-- KEYS[1]  the subject's string: a 13-byte header (entry width w, the newest
--          unit's time in ms in 6 bytes, then head, count and capacity in 2
--          bytes each; big-endian), then capacity slots of w bytes holding,
--          modulo 256^w, the times of the count units before head, oldest
--          first; each is decoded as the latest time <= newest that it fits
-- ARGV     limit, window ms, n (0: peek), default width, now ms (-1: server
--          TIME), 1 to read and write the string by ranges (large limits)
--          or 0 to read and write it whole, and optionally ahead ms (a
--          lease, see package lease): the units are recorded at now + ahead,
--          so they count until now + ahead + window
-- returns  when allowed, reset after ms * (limit + 1) + remaining if that is
--          below 2^53; else {allowed, remaining, retry after ms (-1: never),
--          reset after ms}
local key = KEYS[1]
local limit = ARGV[1] + 0
local window = ARGV[2] + 0
local n = ARGV[3] + 0
local wdef = ARGV[4] + 0
local now = now_ms(ARGV[5])
local ahead = (ARGV[7] or 0) + 0
-- a unit recorded at t counts while now - t < window
local floor = now - window
local byte = string.byte

local s -- the whole string, when read whole
local hdr
if ARGV[6] == '1' then
  hdr = redis.call('GETRANGE', key, '0', '12')
else
  s = redis.call('GET', key)
  hdr = s
end
local w, newest, head, count, cap = wdef, 0, 0, 0, 0
if hdr and #hdr > 0 then
  local x1, x2, x3, x4, x5, x6, h1, h2, c1, c2, k1, k2
  w, x1, x2, x3, x4, x5, x6, h1, h2, c1, c2, k1, k2 = byte(hdr, 1, 13)
  if k2 == nil or w < 1 or w > 6 then
    return redis.error_reply('ratelimit: compactlog: malformed state in ' .. key)
  end
  newest = ((((x1 * 256 + x2) * 256 + x3) * 256 + x4) * 256 + x5) * 256 + x6
  head = h1 * 256 + h2
  count = c1 * 256 + c2
  cap = k1 * 256 + k2
  -- the value must hold every slot the header claims, or reading a slot
  -- by ranges would read past its end (STRLEN is O(1))
  if cap < 1 or head >= cap or count > cap
    or (s and #s or redis.call('STRLEN', key)) ~= 13 + cap * w then
    return redis.error_reply('ratelimit: compactlog: malformed state in ' .. key)
  end
end
local m = 256 ^ w

-- at(q) is the time of the q-th oldest unit (0-based). Times never
-- decrease from the oldest unit to the newest, and every unit lies less
-- than 256^w ms before newest (the writer checks it): the decoding is exact.
local seen = {} -- by ranges: the times read so far, by q
local function at(q)
  local p = 13 + ((head - count + q) % cap) * w
  local r, o = s, p
  if not s then
    if seen[q] then
      return seen[q]
    end
    r, o = redis.call('GETRANGE', key, int(p), int(p + w - 1)), 0
  end
  local v = 0
  for j = o + 1, o + w do
    v = v * 256 + byte(r, j)
  end
  v = newest - (newest - v) % m
  if not s then
    seen[q] = v
  end
  return v
end

-- first: the oldest unit that still counts. A busy subject forgets a few
-- units per decision and an idle one all of them, so look at the newest,
-- then at the oldest 1, 2, 4, ... before a binary search: a few reads in
-- those cases, about 2 log2(count) at worst.
local lo, hi = 0, count
if count > 0 and at(count - 1) <= floor then
  lo = count
else
  local step = 1
  while lo + step < hi and at(lo + step - 1) <= floor do
    lo = lo + step
    step = step * 2
  end
  hi = math.min(hi, lo + step)
end
while lo < hi do
  local mid = (lo + hi - (lo + hi) % 2) / 2
  if at(mid) > floor then
    hi = mid
  else
    lo = mid + 1
  end
end
local first = lo
local live = count - first

-- be6(x) is x (an integer in [0, 2^48)) as 6 bytes, big-endian.
local function be6(x)
  local b6 = x % 256
  x = (x - b6) / 256
  local b5 = x % 256
  x = (x - b5) / 256
  local b4 = x % 256
  x = (x - b4) / 256
  local b3 = x % 256
  x = (x - b3) / 256
  local b2 = x % 256
  return (x - b2) / 256, b2, b3, b4, b5, b6
end

-- enc(x, width) is x (an integer in [0, 256^width)) in width bytes.
local function enc(x, width)
  return string.sub(string.char(be6(x)), 7 - width)
end

-- fields is the header: entry width, newest time, head, count, capacity.
local function fields(width, t, h, c, k)
  return string.char(width, be6(t)) .. string.char((h - h % 256) / 256, h % 256,
    (c - c % 256) / 256, c % 256, (k - k % 256) / 256, k % 256)
end

-- store forgets the units before first and records k (> 0) units at time
-- t, with the key expiring when the newest unit leaves the window.
local function store(k, t)
  local keep = count - first
  local oldest = t
  if keep > 0 then
    oldest = at(first)
  end
  -- the fewest bytes (at least the window's) that keep the decoding exact
  local w2 = wdef
  while 256 ^ w2 <= t - oldest do
    w2 = w2 + 1
  end
  local ttl = t + window - now
  if ttl == window then
    ttl = ARGV[2] -- its text is at hand, no number to format
  else
    ttl = int(ttl)
  end
  if cap == limit and w2 == w then
    -- in place: k slots from head (wrapping once at most), and the header
    local e = enc(t % m, w)
    local run = math.min(k, cap - head)
    local f = fields(w, t, (head + k) % cap, keep + k, cap)
    if s then
      local a = 13 + head * w -- bytes before the first slot written
      if k == run then
        s = f .. string.sub(s, 14, a) .. string.rep(e, k) .. string.sub(s, a + k * w + 1)
      else
        s = f .. string.rep(e, k - run) .. string.sub(s, 14 + (k - run) * w, a) .. string.rep(e, run)
      end
      redis.call('SET', key, s, 'PX', ttl)
      return
    end
    redis.call('SETRANGE', key, int(13 + head * w), string.rep(e, run))
    if k > run then
      redis.call('SETRANGE', key, '13', string.rep(e, k - run))
    end
    redis.call('SETRANGE', key, '0', f)
    redis.call('PEXPIRE', key, ttl)
    return
  end
  -- a new ring of limit slots (a new subject, another Limit or width):
  -- the units kept, then the new ones
  if not s and cap > 0 then
    s = redis.call('GET', key)
  end
  local m2 = 256 ^ w2
  local parts = {}
  for q = first, count - 1 do
    parts[#parts + 1] = enc(at(q) % m2, w2)
  end
  parts[#parts + 1] = string.rep(enc(t % m2, w2), k)
  parts[#parts + 1] = string.rep('\0', (limit - keep - k) * w2)
  redis.call('SET', key, fields(w2, t, (keep + k) % limit, keep + k, limit) .. table.concat(parts), 'PX', ttl)
end

local want = math.max(n, 1) -- a peek (n = 0) asks for one unit
local reset = live > 0 and newest + window - now or 0 -- until the newest unit leaves

-- Denied requests, Peek and n = 0 write nothing: only a recorded request
-- forgets the units that left the window.
if want > limit then return never(limit, live, reset) end

if live + want <= limit then
  if n > 0 then
    -- recorded ahead for a lease; at the newest unit's time if the clock
    -- went back (the ring stays in time order)
    local t = math.max(now + ahead, newest)
    store(n, t)
    reset = t + window - now
  end
  return allowed(limit, limit - live - n, reset)
end

-- Denied: the (live + want - limit)-th oldest live unit must leave first.
local retry = at(first + live + want - limit - 1) + window - now
return {0, math.max(limit - live, 0), retry, reset}
