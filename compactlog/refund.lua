-- Refund for the compact log, run as the head of one script whose tail is
-- compactlog.lua: this part gives units back, then the decision script,
-- called as a peek through the local ARGV below, reports the state after.
-- KEYS[1]  the subject's string (see compactlog.lua)
-- ARGV     limit, window ms, 0, default width, now ms (-1: server TIME),
--          ranges flag (as compactlog.lua), units to give back (> 0)
--
-- The newest min(units, live) slots go: the newest units that still count
-- (a binary search over them, O(log n) GETRANGEs of one slot), by moving
-- the ring's head back and rewriting the header with the new count and
-- newest time. Units that left the window are never given back. When no
-- unit that counts is left the key is deleted; otherwise it expires
-- window after its new newest unit. A malformed value (a header that
-- does not parse, or a length other than the header claims) is left as it
-- is, for the decision script to report.
local now = now_ms(ARGV[5])
do
  local key = KEYS[1]
  local window = ARGV[2] + 0
  local floor = now - window
  local byte = string.byte
  local hdr = redis.call('GETRANGE', key, 0, 12)
  local w, x1, x2, x3, x4, x5, x6, h1, h2, c1, c2, k1, k2 = byte(hdr, 1, 13)
  if k2 ~= nil and w >= 1 and w <= 6 then
    local newest = ((((x1 * 256 + x2) * 256 + x3) * 256 + x4) * 256 + x5) * 256 + x6
    local head = h1 * 256 + h2
    local count = c1 * 256 + c2
    local cap = k1 * 256 + k2
    if cap >= 1 and head < cap and count <= cap and redis.call('STRLEN', key) == 13 + cap * w then
      local m = 256 ^ w
      -- at(q) is the time of the q-th oldest unit (0-based)
      local function at(q)
        local p = 13 + ((head - count + q) % cap) * w
        local s = redis.call('GETRANGE', key, p, p + w - 1)
        local v = 0
        for j = 1, w do
          v = v * 256 + byte(s, j)
        end
        return newest - (newest - v) % m
      end
      -- g: the most of the newest units, at most the units given back,
      -- that all still count (times never decrease along the ring)
      local lo, hi = 0, math.min(ARGV[7] + 0, count)
      while lo < hi do
        local mid = (lo + hi + 1 - (lo + hi + 1) % 2) / 2
        if at(count - mid) > floor then
          lo = mid
        else
          hi = mid - 1
        end
      end
      local g = lo
      if g > 0 then
        local keep = count - g
        local t = 0
        if keep > 0 then
          t = at(keep - 1)
        end
        if t <= floor then
          redis.call('DEL', key) -- nothing that counts is left
        else
          local h = (head - g) % cap
          local b6 = t % 256
          local y = (t - b6) / 256
          local b5 = y % 256
          y = (y - b5) / 256
          local b4 = y % 256
          y = (y - b4) / 256
          local b3 = y % 256
          y = (y - b3) / 256
          local b2 = y % 256
          local b1 = (y - b2) / 256
          redis.call('SETRANGE', key, 0, string.char(w, b1, b2, b3, b4, b5, b6,
            (h - h % 256) / 256, h % 256, (keep - keep % 256) / 256, keep % 256, k1, k2))
          redis.call('PEXPIRE', key, t + window - now)
        end
      end
    end
  end
end
-- the decision script that follows reads this ARGV: a peek at now
local ARGV = {ARGV[1], ARGV[2], 0, ARGV[4], now, ARGV[6]}
