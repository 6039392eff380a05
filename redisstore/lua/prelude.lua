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

-- MAXEXACT is 2^53: a post-charge takes no count or debt beyond it
-- (algorithm.maxExact).
local MAXEXACT = 9007199254740992

local function mod(a, b) return a - idiv(a, b) * b end

-- muldiv is floor(a * b / c) and a * b mod c, exactly, for integers a, b
-- >= 0 and c > 0 whose quotient is below 2^53; a * b itself may not be,
-- and doubles past 2^53 lose units. With a = qa*c + ra and b = qb*c + rb,
-- a*b/c = qa*b + ra*qb + ra*rb/c, where the first two products are below
-- the quotient; ra*rb/c, of two numbers below c, is built over rb's bits
-- (double, then add ra, each reduced mod c), so that no intermediate
-- value exceeds 2c and every step is exact.
local function muldiv(a, b, c)
  local qa, qb = idiv(a, c), idiv(b, c)
  local ra, rb = a - qa * c, b - qb * c
  local q, r, bit = 0, 0, 1
  while bit * 2 <= rb do bit = bit * 2 end
  while bit >= 1 do
    q, r = 2 * q, 2 * r
    if r >= c then q, r = q + 1, r - c end
    if rb >= bit then
      rb = rb - bit
      if r >= c - ra then q, r = q + 1, r - (c - ra) else r = r + ra end
    end
    bit = bit / 2
  end
  return qa * b + ra * qb + q, r
end

-- A state is stored as big-endian doubles: the algorithm package's State
-- fields A, B, C and W (the window it was written under), each an integer
-- below 2^53, so exact; the fixed window, without a C, stores A, B and W
-- (24 bytes), the sliding counter all four (32 bytes); the token bucket
-- stores A, B, E and W (32 bytes) and GCRA A, B, C, W and E (40 bytes), E
-- the expiry its key was given (see expiry in bucket.lua). Packing and
-- unpacking cost a fraction of formatting and parsing decimal text.
-- Earlier versions wrote A and B (16 bytes), or A, B and C (24 bytes, for
-- the algorithms with a C), or the decimal form "A:B" or "A:B:C" (it
-- starts with a digit or '-', which a packed non-negative integer never
-- does: its first byte is 0x00 or 0x3F-0x43), or the buckets' states
-- without E (24 and 32 bytes); these are still read, with the fields they
-- lack 0 (W = 0: the policy's window; E = 0: unknown). load returns
-- whether the key exists, then A, B, C, W and E; has_c says whether the
-- algorithm keeps a C.
--
-- The value a call wrote last, and its key (see write), answer a load of
-- that key without a GET: a settlement reads the state it has just
-- written, for the standing it reports. decide clears them at each call,
-- since other clients write between calls.
local last_key, last_value
local function load(key, has_c)
  local v
  if key == last_key then v = last_value else v = call('GET', key) end
  if not v then return false, 0, 0, 0, 0, 0 end
  local first = byte(v, 1)
  if first == 45 or (first >= 48 and first <= 57) then
    local a, b, c = match(v, '^(%-?%d+):(%-?%d+):?(%-?%d*)$')
    if a then return true, tonumber(a), tonumber(b), tonumber(c) or 0, 0, 0 end
    return false, 0, 0, 0, 0, 0
  end
  local n = #v
  if n == 40 then
    local a, b, c, w, e = unpack('>ddddd', v)
    return true, a, b, c, w, e
  end
  if n == 32 then
    local a, b, x, w = unpack('>dddd', v)
    if has_c then return true, a, b, x, w, 0 end
    return true, a, b, 0, w, x
  end
  if n == 24 then
    local a, b, x = unpack('>ddd', v)
    if has_c then return true, a, b, x, 0, 0 end
    return true, a, b, 0, x, 0
  end
  local a, b = unpack('>dd', v)
  return true, a, b, 0, 0, 0
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

-- write stores value v at key, keeping the key's TTL (keep) or setting
-- it to expire at exp (µs).
local function write(key, v, now, exp, keep)
  last_key, last_value = key, v
  if keep then
    call('SET', key, v, 'KEEPTTL')
  else
    call('SET', key, v, 'PX', ttl(exp, now))
  end
end

-- put is the commit of the algorithms kept in a string: it writes the state
-- (a, b, c, w), or (a, b, w) when c is nil, w the policy's window; keep
-- keeps the key's TTL (KEEPTTL) instead of setting it to expire at exp.
-- The cost is not needed.
local function put(key, now, _, a, b, c, exp, keep, w)
  local v
  if c then v = pack('>dddd', a, b, c, w) else v = pack('>ddd', a, b, w) end
  write(key, v, now, exp, keep)
end
