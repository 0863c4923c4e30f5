-- Token bucket in one hash, in exact integers (see the package doc): the
-- body of a script whose head and tail are internal/exact's head.lua and
-- decide.lua.
-- KEYS[1]  the subject's hash: t = tokens x wp, l = last refill in ms; and
--          when the last write was under a per-call limit other than the
--          strategy's, p, w, c: that limit's lp, wp and capacity (t's scale)
-- ARGV     lp (units refilled per ms), wp (units per token), capacity in
--          tokens, n, now (see head.lua), then the strategy's own lp, wp
--          and capacity (the scale of a hash without p, w, c), and the
--          window in ms
local dlp, dwp, dcap = ARGV[6] + 0, ARGV[7] + 0, ARGV[8] + 0
local window = ARGV[9] + 0
local tokens = full
local last = now
local s = redis.call('HMGET', key, 't', 'l', 'p', 'w', 'c')
if s[1] then
  tokens = tonumber(s[1])
  last = tonumber(s[2])
  -- the scale and rate of the stored tokens
  local olp, owp, ocap = dlp, dwp, dcap
  if s[3] then
    olp, owp, ocap = tonumber(s[3]), tonumber(s[4]), tonumber(s[5])
  end
  local ofull = ocap * owp
  if now > last then
    -- a huge product is inexact but then above full, which is exact
    tokens = tokens + (now - last) * olp
    last = now
  end
  if owp ~= wp or ocap ~= cap then
    -- another limit than the last write's: the units used carry over
    -- (exact.Carry), up to an empty bucket
    local d = ofull - tokens
    if d <= 0 then
      tokens = full
    elseif math.floor(d / owp) >= cap then
      tokens = 0
    else
      tokens = full - math.min(math.ceil(d * (window / owp) / (window / wp)), full)
    end
  end
  if tokens >= full then
    -- a full bucket has no refill time to remember
    tokens = full
    last = now
  end
end
local used = full - tokens

-- store writes the bucket after an allowed request
local function store(after, reset)
  tokens = full - after
  if lp == dlp and wp == dwp and cap == dcap then
    redis.call('HSET', key, 't', int(tokens), 'l', int(last))
    if s[3] then
      redis.call('HDEL', key, 'p', 'w', 'c')
    end
  else
    redis.call('HSET', key, 't', int(tokens), 'l', int(last), 'p', ARGV[1], 'w', ARGV[2], 'c', ARGV[3])
  end
  redis.call('PEXPIRE', key, int(reset))
end
