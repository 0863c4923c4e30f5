-- GCRA on one stored instant, the theoretical arrival time (TAT), in exact
-- integers (see the package doc): the body of a script whose head and
-- tail are internal/exact's head.lua and decide.lua.
-- KEYS[1]  the subject's TAT: whole ms, then when digits > 0 the remainder
--          in 1/lp ms, zero-padded to digits digits; or, when written under
--          a per-call limit other than the strategy's, "ms,remainder,lp,wp"
--          with that limit's lp and wp
-- ARGV     lp, wp (the emission interval in 1/lp ms), capacity in units,
--          n, now (see head.lua), digits, format of the value when
--          digits > 0 ("%d%0<digits>d"), then the strategy's own lp and wp
--          (digits and format are its own), and the window in ms
local digits = ARGV[6] + 0
local dlp, dwp = ARGV[8] + 0, ARGV[9] + 0
local window = ARGV[10] + 0
-- ahead: how far TAT is after now, in 1/lp ms; 0 once it has passed
local ahead = 0
local v = redis.call('GET', key)
if v then
  local q, r
  -- the scale of the stored TAT
  local olp, owp = dlp, dwp
  if not string.find(v, ',', 1, true) then
    -- written under the strategy's own limit
    if digits == 0 then
      q, r = tonumber(v), 0
    else
      q, r = tonumber(string.sub(v, 1, -digits - 1)), tonumber(string.sub(v, -digits))
    end
  else
    local a, b, c, d = string.match(v, '^(%d+),(%d+),(%d+),(%d+)$')
    if a then
      q, r, olp, owp = a + 0, b + 0, c + 0, d + 0
    end
  end
  if q and r and q >= now then
    ahead = (q - now) * olp + r
    if olp ~= lp or owp ~= wp then
      -- another limit than the last write's: the units used carry over
      -- (exact.Carry), up to an empty bucket
      if math.floor(ahead / owp) >= cap then
        ahead = full
      else
        ahead = math.ceil(ahead * (window / owp) / (window / wp))
      end
    end
    if ahead > full then
      -- only after a change of limit: never more than an empty bucket
      ahead = full
    end
  end
end
local used = ahead

-- store writes TAT after an allowed request
local function store(after, reset)
  local ms = math.floor(after / lp)
  local tat = now + ms
  if lp ~= dlp or wp ~= dwp then
    tat = format('%d,%d,%d,%d', tat, after - ms * lp, lp, wp)
  elseif digits > 0 then
    tat = format(ARGV[7], tat, after - ms * lp)
  else
    tat = int(tat)
  end
  redis.call('SET', key, tat, 'PX', int(reset))
end
