-- The prelude of every decision and refund script (engine.Script): what
-- they share of the engine's conventions.

-- now_ms returns the "now" argument arg in ms, or the server's TIME in ms
-- when arg is negative (engine.ServerTime), read once per invocation: the
-- requests of one invocation (engine.Many) are decided at one instant.
-- ARGV and TIME strings are turned into numbers by arithmetic, which is
-- cheaper than tonumber.
-- The last argument and its time are kept: the requests of an invocation
-- that share their arguments convert "now" once.
local time_ms, now_arg, now_val
local function now_ms(arg)
  if arg == now_arg then
    return now_val
  end
  local now = arg + 0
  if now < 0 then
    if not time_ms then
      local t = redis.call('TIME')
      local us = t[2] + 0
      time_ms = t[1] * 1000 + (us - us % 1000) / 1000
    end
    now = time_ms
  end
  now_arg, now_val = arg, now
  return now
end

-- int returns the decimal text of x, an integer below 2^53 in magnitude
-- (every number the scripts hand redis.call is one): given a Lua number,
-- redis.call formats it with "%.17g" itself, which on Redis 7.0 costs more
-- than the command it is an argument of; "%d" is several times cheaper,
-- and the text is the same.
local format = string.format
local function int(x)
  return format('%d', x)
end

-- allowed returns an allowed decision: the one integer
-- reset * (limit + 1) + remaining while it is below 2^53 (exact in Lua's
-- numbers), the table {1, remaining, 0, reset} beyond (see package engine).
local function allowed(limit, remaining, reset)
  local x = reset * (limit + 1) + remaining
  if x < 9007199254740992 then
    return x
  end
  return {1, remaining, 0, reset}
end

-- never returns the decision of a request larger than limit, which can
-- never pass: denied, retry never (-1), with the remaining units of a
-- subject that used used.
local function never(limit, used, reset)
  return {0, math.max(limit - used, 0), -1, reset}
end
