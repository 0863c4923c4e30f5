-- Refund for multilimit, run as the head of one script whose tail is
-- multilimit.lua: this part gives units back under every rule, then the
-- decision script, called as a peek through the local ARGV below, reports
-- the state after.
-- KEYS[i]  rule i's key (see multilimit.lua)
-- ARGV     0, now ms (-1: server TIME), then per rule: kind, limit, window
--          ms; then the units to give back (> 0)
--
-- Every rule gives back by its own rule, up to the units given back:
-- a sliding log rule its newest live units (as slidinglog's refund: the
-- newest entries whole, then part of the entry where it stops; deleted
-- when no live unit is left), a fixed window rule its current window's
-- count, down to 0. Units that left a rule's window are never given back.
local now = tonumber(ARGV[2])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
do
  local give = tonumber(ARGV[3 + 3 * #KEYS])
  local M = 2199023255552 -- 2^41, as in multilimit.lua
  for i = 1, #KEYS do
    local a = 2 + (i - 1) * 3
    local key = KEYS[i]
    local window = tonumber(ARGV[a + 3])
    if tonumber(ARGV[a + 1]) == 1 then
      local floor = now - window
      local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
      if top[1] then
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
        if count > 0 then
          local k = count - math.min(give, count) -- the live units kept
          if k == 0 then
            redis.call('DEL', key)
          else
            -- e: the entry holding the k-th live unit; lo its rank
            local lo = brank + 1
            local e = redis.call('ZRANGE', key, lo, lo, 'WITHSCORES')
            if (e[1] - base) % M < k then
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
            redis.call('ZREMRANGEBYRANK', key, lo + 1, -1)
            if (e[1] - base) % M > k then
              redis.call('ZREM', key, e[1])
              redis.call('ZADD', key, e[2], (base + k) % M)
            end
            redis.call('PEXPIRE', key, e[2] + window - now)
          end
        end
      end
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
