-- Exact sliding window log on one compact string.
-- KEYS[1]  the subject's string: 1 byte w, 6 bytes newest (ms, big-endian),
--          then one w-byte entry per unit, oldest first: its time in ms
--          modulo 256^w, decoded as the latest time <= newest that it fits
-- ARGV     limit, window ms, n (0: peek), default entry width, now ms
--          (-1: server TIME)
-- returns  when allowed, reset after ms * (limit + 1) + remaining if that is
--          below 2^53; else {allowed, remaining, retry after ms (-1: never),
--          reset after ms}
local key = KEYS[1]
local limit = ARGV[1] + 0
local window = ARGV[2] + 0
local n = ARGV[3] + 0
local wdef = ARGV[4] + 0
local now = ARGV[5] + 0
if now < 0 then
  local t = redis.call('TIME')
  local us = t[2] + 0
  now = t[1] * 1000 + (us - us % 1000) / 1000
end
-- a unit recorded at t counts while now - t < window
local floor = now - window
local byte = string.byte

local s = redis.call('GET', key)
local w, newest, count = wdef, 0, 0
if s then
  w = byte(s, 1)
  if #s < 7 or w < 1 or w > 6 or (#s - 7) % w ~= 0 then
    return redis.error_reply('ratelimit: compactlog: malformed state in ' .. key)
  end
  local a, b, c, d, e, f = byte(s, 2, 7)
  newest = ((((a * 256 + b) * 256 + c) * 256 + d) * 256 + e) * 256 + f
  count = (#s - 7) / w
end
local m = 256 ^ w

-- at(q) is the time of the q-th oldest entry (0-based). Times never
-- decrease from the oldest entry to the newest, and every entry lies
-- within 256^w - 1 ms before newest (the writer checks it), so the decoding
-- is exact.
local function at(q)
  local p = 8 + q * w
  local v = 0
  for j = p, p + w - 1 do
    v = v * 256 + byte(s, j)
  end
  return newest - (newest - v) % m
end

-- first: the oldest entry that still counts (binary search)
local lo, hi = 0, count
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

-- enc(x, width) is x (an integer >= 0) in width bytes, big-endian.
local function enc(x, width)
  local out = ''
  for _ = 1, width do
    local r = x % 256
    out = string.char(r) .. out
    x = (x - r) / 256
  end
  return out
end

-- store writes the entries from first on, then k entries at time t, with
-- the key expiring when the newest leaves the window; or deletes the key
-- when nothing is left.
local function store(k, t)
  local keep = count - first
  if keep + k == 0 then
    redis.call('DEL', key)
    return
  end
  local top = newest
  if k > 0 then
    top = t
  end
  local oldest = top
  if keep > 0 then
    oldest = at(first)
  end
  -- the fewest bytes (at least the window's) that keep the decoding exact
  local w2 = wdef
  while 256 ^ w2 <= top - oldest do
    w2 = w2 + 1
  end
  local body = ''
  if keep > 0 then
    if w2 == w then
      body = string.sub(s, 8 + first * w)
    else
      local parts = {}
      local m2 = 256 ^ w2
      for q = first, count - 1 do
        parts[#parts + 1] = enc(at(q) % m2, w2)
      end
      body = table.concat(parts)
    end
  end
  if k > 0 then
    body = body .. string.rep(enc(t % 256 ^ w2, w2), k)
  end
  body = string.char(w2) .. enc(top, 6) .. body
  if k == 0 then
    -- only evicted: the newest entry, and so the expiry, are unchanged
    redis.call('SET', key, body, 'KEEPTTL')
    return
  end
  local ttl = top + window - now
  if ttl == window then
    ttl = ARGV[2]
  end
  redis.call('SET', key, body, 'PX', ttl)
end

local want = n
if n == 0 then
  want = 1
end
local reset = 0
if live > 0 then
  reset = newest + window - now
end

if want > limit then
  if n > 0 and first > 0 then
    store(0, now)
  end
  return {0, math.max(limit - live, 0), -1, reset}
end

if live + want <= limit then
  if n > 0 then
    -- recorded at the newest entry's time if the clock went back
    local t = math.max(now, newest)
    store(n, t)
    reset = t + window - now
  end
  local remaining = limit - live - n
  local x = reset * (limit + 1) + remaining
  if x < 9007199254740992 then
    return x
  end
  return {1, remaining, 0, reset}
end

-- Denied: the (live + want - limit)-th oldest live entry must leave first.
if n > 0 and first > 0 then
  store(0, now)
end
return {0, math.max(limit - live, 0), at(first + live + want - limit - 1) + window - now, reset}
