-- Floodgate's Redis script: the shared helpers. The loaded code is this
-- file, one file per algorithm, then dispatch.lua (see scripts.go), as a
-- function library (Redis 7 and later) or as a script for EVAL.
--
-- Every quantity is an integer held in a Lua number (an IEEE double).
-- Policy.Validate keeps every operand at or below 2^53, where doubles are
-- exact, so this arithmetic gives the same integers as package algorithm.
--
-- The library is defined where only its functions may be registered, not
-- math or string used, so these are set by the first call (see decide).
local floor, max, format, match, call

-- idiv is floor(a / b) for an integer a and a positive integer b. The
-- double quotient of two large integers can round across an integer
-- boundary; one correction step either way makes it exact.
local function idiv(a, b)
  local q = floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

local function ceildiv(a, b) return idiv(a + b - 1, b) end

local function mod(a, b) return a - idiv(a, b) * b end

-- int formats an integer for a command argument or a stored value. Redis
-- would format a bare Lua number with at most 17 significant digits or in
-- exponent form, so numbers never reach redis.call unformatted.
local function int(x) return format('%.0f', x) end

-- pair formats a two-field state "A:B" (one format call instead of two).
local function pair(a, b) return format('%.0f:%.0f', a, b) end

-- A state is stored as a string "A:B" or "A:B:C" of decimal integers: the
-- algorithm package's State fields.
local function load(key)
  local v = call('GET', key)
  if v then
    local a, b, c = match(v, '^(%-?%d+):(%-?%d+):?(%-?%d*)$')
    if a then return true, tonumber(a), tonumber(b), tonumber(c) or 0 end
  end
  return false, 0, 0, 0
end

-- ttl converts the absolute expiry exp (µs) of a state into PX
-- milliseconds, rounded up, so a key never disappears while its state still
-- differs from a fresh one. slack adds milliseconds (set by each call from
-- its ARGV[2]): 0, except with a test clock, which does not advance with
-- the server's (see WithClock).
local slack = 0
local function ttl(exp, now) return int(max(ceildiv(exp - now, 1000), 1) + slack) end

