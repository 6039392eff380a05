-- The dispatcher: one call decides one or more requests, in order, each
-- across all of its policies, all or nothing.
--
-- ARGV[1]: TTL slack (ms, see ttl). Then one argument per request, packed
-- big-endian: now (double, µs since the epoch, or -1 for the server's
-- TIME); for a post-charge or a refund (floodgate.Post, Refund) a second
-- double, -1 for a post-charge, else the time (µs) the refunded cost was
-- admitted at; then per policy its wire code (one byte, see WIRE), quota,
-- capacity, window (µs) and cost (in the policy's unit), each a double:
-- 8 (or 16) + 33 bytes per policy, decoded by one unpack each.
-- A slot's request (slots.lua) has one key and always now = -1; then its
-- code (one byte: ACQUIRE or RELEASE); to acquire, the cap and the lease
-- (ms) as doubles; then the holder's 12-byte token: 37 bytes to acquire,
-- 21 to release, lengths no request of policies has (see the loop below).
-- KEYS: per request, its policy keys in the same order (a slot's: its set).
-- Reply: per request and policy: allowed (1/0), remaining, reset after (µs),
-- retry after (µs), full after (µs; the sliding counter's, else 0). When a
-- request is denied, a policy that would have admitted it reports its
-- remaining before the cost. A slot's request replies five numbers too: to
-- acquire, allowed and the slots free after it; to release, 1 if the
-- token held a slot, else 0; then zeros.

-- WIRE maps each algorithm's wire code to its loader. The codes are part of
-- the protocol between the Go store and this code (wireCode in wire.go,
-- pinned by TestWireCodes), not the Go enum's order. CALENDAR, ACQUIRE and
-- RELEASE are the codes of requests no algorithm decides alone: a calendar
-- period's fixed window, and a slot's acquire and release (calendarCode,
-- acquireCode and releaseCode in wire.go, pinned by TestWireCodes too).
--
-- Each algorithm's functions are made when a call first needs them: run
-- with EVAL, the whole script runs again on every call, and defining all
-- five would cost more than most calls' own arithmetic. In a function
-- library they are made once.
local CALENDAR = 6
local ACQUIRE = 7
local RELEASE = 8
local WIRE = {
  [1] = fixed_window,
  [2] = sliding_log,
  [3] = sliding_counter,
  [4] = token_bucket,
  [5] = gcra,
  [CALENDAR] = function() return fixed_window(true) end,
  [9] = anchored_window,
}
local TAKE, COMMIT, OWE, REFUND = {}, {}, {}, {}

-- The policies of the request being decided and the writes they would
-- make, reused from call to call (in a library they outlive the call) so
-- that a call builds no table but its reply.
local ALG, Q, CAP, W, COST, SA, SB, SC, EXP, KEEP = {}, {}, {}, {}, {}, {}, {}, {}, {}, {}

local function algorithm(code)
  local loader = WIRE[code]
  if not loader then return nil end
  TAKE[code], COMMIT[code], OWE[code], REFUND[code] = loader()
  return TAKE[code]
end

-- request decodes request r's policies, from byte pos on, into ALG … COST
-- and returns their count.
local function request(r, pos)
  local p = (#r - pos + 1) / 33
  for i = 1, p do
    ALG[i], Q[i], CAP[i], W[i], COST[i], pos = unpack('>Bdddd', r, pos)
  end
  return p
end

-- server_time is the server's clock (µs since the epoch).
local function server_time()
  local t = call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- single decides a request of one policy, as several would, without its
-- tables: its cost is 0 only for a peek, and its one policy decides alone.
-- It returns the decision's five numbers, or nil for an unknown algorithm.
local function single(key, now, code, q, cap, w, cost)
  local take = TAKE[code] or algorithm(code)
  if not take then return nil end
  local allowed, rem, reset, retry, full, sa, sb, sc, exp, keep = take(key, now, q, cap, w, cost)
  if allowed == 1 and cost > 0 then COMMIT[code](key, now, cost, sa, sb, sc, exp, keep, w) end
  return allowed, rem, reset, retry, full
end

-- unknown is the error reply for a request naming an algorithm code that
-- WIRE lacks.
local function unknown(code)
  return redis.error_reply('floodgate: unknown algorithm code ' .. code)
end

-- several decides request r of p policies, its keys following KEYS[k],
-- into out after out[o], all or nothing, and returns nil, or an error
-- reply for an unknown algorithm.
local function several(KEYS, k, r, now, out, o)
  local p = request(r, 9)
  -- A request charged nothing in every unit is a peek; otherwise a policy
  -- charged nothing reports its standing and cannot deny.
  local peek = true
  for i = 1, p do
    if COST[i] > 0 then peek = false end
  end
  -- take returns the decision (allowed, remaining, reset, retry, full)
  -- and, when it admits a cost, the write to make: state fields a, b, c,
  -- expiry, keep-TTL flag (the window is the policy's, passed to the
  -- commit as its last argument). The writes wait until every policy of
  -- the request has admitted it (all or nothing).
  local base, ok = o, true
  for i = 1, p do
    local code, cost = ALG[i], COST[i]
    local take = TAKE[code] or algorithm(code)
    if not take then return unknown(code) end
    local allowed, rem, reset, retry, full
    allowed, rem, reset, retry, full, SA[i], SB[i], SC[i], EXP[i], KEEP[i] = take(KEYS[k + i], now, Q[i], CAP[i], W[i], cost)
    if cost == 0 and not peek then allowed, retry = 1, 0 end
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = allowed, rem, reset, retry, full
    o = o + 5
    ok = ok and allowed == 1
  end
  if ok then
    for i = 1, p do
      if COST[i] > 0 then
        COMMIT[ALG[i]](KEYS[k + i], now, COST[i], SA[i], SB[i], SC[i], EXP[i], KEEP[i], W[i])
      end
    end
  else
    for i = 1, p do
      local j = base + 5 * (i - 1)
      if out[j + 1] == 1 then out[j + 2] = out[j + 2] + COST[i] end
    end
  end
end

-- settle1 applies one policy's post-charge (at < 0) or refund (of a cost
-- admitted at at) of cost, and returns its standing after it: remaining,
-- reset after and full after. The state it wrote is read back from the
-- call's last write (see load), not from Redis.
local function settle1(key, now, at, code, q, cap, w, cost)
  if cost > 0 then
    if at < 0 then
      OWE[code](key, now, q, cap, w, cost)
    else
      REFUND[code](key, at, q, cap, w, cost)
    end
  end
  local _, rem, reset, _, full = TAKE[code](key, now, q, cap, w, 0)
  return rem, reset, full
end

-- settle applies request r of p policies, a post-charge or a refund (see
-- the header), its keys following KEYS[k], writing into out after out[o]
-- each policy's standing after it, allowed, and returns nil, or an error
-- reply (before any write) for an unknown algorithm.
local function settle(KEYS, k, r, now, out, o)
  local at = unpack('>d', r, 9)
  local p = request(r, 17)
  for i = 1, p do
    local code = ALG[i]
    if not (TAKE[code] or algorithm(code)) then return unknown(code) end
  end
  for i = 1, p do
    local rem, reset, full = settle1(KEYS[k + i], now, at, ALG[i], Q[i], CAP[i], W[i], COST[i])
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 1, rem, reset, 0, full
    o = o + 5
  end
end

-- slot decides a slot's request r for key at now into out after out[o],
-- and returns nil, or an error reply for an unknown code.
local function slot(key, r, now, out, o)
  local code, allowed, free = byte(r, 9), 0, 0
  if code == ACQUIRE and #r == 37 then
    allowed, free = acquire(key, now, r)
  elseif code == RELEASE and #r == 21 then
    allowed = release(key, r)
  else
    return unknown(code)
  end
  out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = allowed, free, 0, 0, 0
end

-- REFUSED fills the reply fields of a request one of whose commands Redis
-- refused: a key holding a value of another type (WRONGTYPE), or one the
-- user may not touch. That request alone fails (errKeyRefused in the Go
-- store); the others of the call are decided. Writes the refused request
-- made before the refusal stay, as a script's writes do.
local REFUSED = -2

-- keycount is the number of keys request r names (see the header).
local function keycount(r)
  local n = #r - 8
  if #r == 41 or #r == 49 then return 1 end
  if n % 33 == 8 then return (n - 8) / 33 end
  if n % 33 == 0 then return n / 33 end
  return 1
end

-- one decides request r at now, its keys following KEYS[k], into out
-- after out[o], and returns nil, or an error reply for an unknown code.
local function one(KEYS, k, r, now, out, o)
  if #r == 41 then
    -- One policy, the most common request: decided without the tables.
    local code, q, cap, w, cost = unpack('>Bdddd', r, 9)
    local allowed, rem, reset, retry, full = single(KEYS[k + 1], now, code, q, cap, w, cost)
    if not allowed then return unknown(code) end
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = allowed, rem, reset, retry, full
  elseif #r == 49 then
    -- A settlement of one policy: without the tables.
    local at, code, q, cap, w, cost = unpack('>dBdddd', r, 9)
    if not (TAKE[code] or algorithm(code)) then return unknown(code) end
    local rem, reset, full = settle1(KEYS[k + 1], now, at, code, q, cap, w, cost)
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 1, rem, reset, 0, full
  elseif (#r - 8) % 33 == 8 then
    return settle(KEYS, k, r, now, out, o)
  elseif (#r - 8) % 33 == 0 then
    return several(KEYS, k, r, now, out, o)
  else
    -- Neither 8 nor 16 bytes and whole policies: a slot's request.
    return slot(KEYS[k + 1], r, now, out, o)
  end
end

-- A, O, K: the loop's place in a call (see decide): the next request's
-- index in ARGV, and the reply fields and keys of the requests before it.
-- They live outside the protected call, so that the loop can go on after
-- a refused request; NOW_S is the call's server time, once read.
local A, O, K, NOW_S

-- past moves A, O and K past request ARGV[A], of p keys.
local function past(p) A, O, K = A + 1, O + 5 * p, K + p end

-- loop decides the requests of ARGV from A on into out, advancing A, O
-- and K past each, and returns nil, or an error reply for an unknown code.
local function loop(KEYS, ARGV, out)
  while A <= #ARGV do
    local r = ARGV[A]
    local now = unpack('>d', r)
    if now < 0 then
      NOW_S = NOW_S or server_time()
      now = NOW_S
    end
    local err = one(KEYS, K, r, now, out, O)
    if err then return err end
    past(keycount(r))
  end
end

local function decide(KEYS, ARGV)
  if not call then
    floor, max, byte, format, match = math.floor, math.max, string.byte, string.format, string.match
    pack, unpack, call = struct.pack, struct.unpack, redis.call
  end
  slack = tonumber(ARGV[1])
  last_key, last_value = nil, nil
  if #ARGV == 2 and #ARGV[2] == 41 then
    -- A lone request of one policy, a caller's call when nothing else
    -- waits: decided without the loop.
    local now, code, q, cap, w, cost = unpack('>dBdddd', ARGV[2])
    if now < 0 then now = server_time() end
    local ok, allowed, rem, reset, retry, full = pcall(single, KEYS[1], now, code, q, cap, w, cost)
    if not ok then return { REFUSED, REFUSED, REFUSED, REFUSED, REFUSED } end
    if not allowed then return unknown(code) end
    return { allowed, rem, reset, retry, full }
  end
  -- One protected call runs the whole loop; a refused command ends it at
  -- request A, which is marked REFUSED, and the loop goes on after it.
  local out = {}
  A, O, K, NOW_S = 2, 0, 0, nil
  while true do
    local ok, err = pcall(loop, KEYS, ARGV, out)
    if ok then
      if err then return err end
      return out
    end
    local p = keycount(ARGV[A])
    for j = O + 1, O + 5 * p do out[j] = REFUSED end
    past(p)
  end
end
