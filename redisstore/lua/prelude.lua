-- Floodgate's Redis script: the shared helpers. The loaded code is this
-- file, one file per algorithm, then dispatch.lua (see scripts.go), as a
-- function library (Redis 7 and later) or as a script for EVAL.
--
-- Every quantity is an integer held in a Lua number (an IEEE double).
-- Policy.Validate keeps every operand at or below 2^53, where doubles are
-- exact, so this arithmetic gives the same integers as package algorithm.
--
-- The library is defined where only its functions may be registered, not
-- math, string or struct used, so these are set by the first call (see
-- decide).
local floor, max, byte, format, match, pack, unpack, call

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

-- A state is stored as two or three big-endian doubles (16 or 24 bytes):
-- the algorithm package's State fields, each an integer below 2^53, so
-- exact. Packing and unpacking cost a fraction of formatting and parsing
-- decimal text. A value in the decimal form "A:B" or "A:B:C" of earlier
-- versions (it starts with a digit or '-', which a packed non-negative
-- integer never does: its first byte is 0x00 or 0x3F-0x43) is still read.
local function load(key)
  local v = call('GET', key)
  if not v then return false, 0, 0, 0 end
  local first = byte(v, 1)
  if first == 45 or (first >= 48 and first <= 57) then
    local a, b, c = match(v, '^(%-?%d+):(%-?%d+):?(%-?%d*)$')
    if a then return true, tonumber(a), tonumber(b), tonumber(c) or 0 end
    return false, 0, 0, 0
  end
  if #v == 24 then
    local a, b, c = unpack('>ddd', v)
    return true, a, b, c
  end
  local a, b = unpack('>dd', v)
  return true, a, b, 0
end

-- ttl converts the absolute expiry exp (µs) of a state into PX
-- milliseconds, rounded up, so a key never disappears while its state still
-- differs from a fresh one. slack adds milliseconds (set by each call from
-- its ARGV[1]): 0, except with a test clock, which does not advance with
-- the server's (see WithClock). It is passed to redis.call as a number,
-- which Redis formats with 17 significant digits: exact, and never in
-- exponent form, for an integer below 2^53.
local slack = 0
local function ttl(exp, now) return max(ceildiv(exp - now, 1000), 1) + slack end

-- int formats an integer as decimal text, for the sliding log's member
-- names.
local function int(x) return format('%.0f', x) end

-- put is the commit of the algorithms kept in a string: it writes the state
-- (a, b), or (a, b, c) when c is given; keep keeps the key's TTL (KEEPTTL)
-- instead of setting it to expire at exp. The cost is not needed.
local function put(key, now, _, a, b, c, exp, keep)
  local v
  if c then v = pack('>ddd', a, b, c) else v = pack('>dd', a, b) end
  if keep then
    call('SET', key, v, 'KEEPTTL')
  else
    call('SET', key, v, 'PX', ttl(exp, now))
  end
end
