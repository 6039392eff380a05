-- The dispatcher: one call decides one or more requests, in order, each
-- across all of its policies, all or nothing.
--
-- ARGV: n, TTL slack (ms, see ttl), then per request: now (µs since the
-- epoch, or -1 for the server's TIME), number of policies p, then per
-- policy: algorithm (the floodgate.Algorithm value), quota, capacity,
-- window (µs), cost (in the policy's unit).
-- KEYS: per request, its p policy keys in the same order.
-- Reply: per request and policy: allowed (1/0), remaining, reset after (µs),
-- retry after (µs). When a request is denied, a policy that would have
-- admitted it reports its remaining before the cost.
--
-- Each algorithm's functions are made when a call first needs them: run
-- with EVAL, the whole script runs again on every call, and defining all
-- five would cost more than most calls' own arithmetic. In a function
-- library they are made once.
local LOADERS = { fixed_window, sliding_log, sliding_counter, token_bucket, gcra }
local TAKE, COMMIT = {}, {}

local function decide(KEYS, ARGV)
  if not call then
    floor, max, format, match, call = math.floor, math.max, string.format, string.match, redis.call
  end
  slack = tonumber(ARGV[2])
  local out, o, k, a = {}, 0, 0, 3
  local server_now
  for _ = 1, tonumber(ARGV[1]) do
    local now, p = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
    a = a + 2
    if now < 0 then
      if not server_now then
        local t = call('TIME')
        server_now = tonumber(t[1]) * 1000000 + tonumber(t[2])
      end
      now = server_now
    end
    -- A request charged nothing in every unit is a peek; otherwise a policy
    -- charged nothing reports its standing and cannot deny.
    local peek = true
    for i = 0, p - 1 do
      if tonumber(ARGV[a + 5 * i + 4]) > 0 then peek = false end
    end
    -- take returns the decision and, when it admits a cost, the write to
    -- make: state fields a, b, c, expiry, keep-TTL flag. The writes wait in
    -- pend, 7 slots per policy with the algorithm and cost, until every
    -- policy of the request has admitted it (all or nothing).
    local base, ok, pend = o, true, {}
    for i = 1, p do
      local alg, cost = tonumber(ARGV[a]), tonumber(ARGV[a + 4])
      local take = TAKE[alg]
      if not take then
        local loader = LOADERS[alg]
        if not loader then return redis.error_reply('floodgate: unknown algorithm ' .. tostring(ARGV[a])) end
        take, COMMIT[alg] = loader()
        TAKE[alg] = take
      end
      local allowed, rem, reset, retry, sa, sb, sc, exp, keep = take(KEYS[k + i], now, tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), cost)
      if cost == 0 and not peek then allowed, retry = 1, 0 end
      out[o + 1], out[o + 2], out[o + 3], out[o + 4] = allowed, rem, reset, retry
      local j = 7 * i
      pend[j - 6], pend[j - 5], pend[j - 4], pend[j - 3], pend[j - 2], pend[j - 1], pend[j] = alg, cost, sa, sb, sc, exp, keep
      o, a = o + 4, a + 5
      ok = ok and allowed == 1
    end
    if ok then
      for i = 1, p do
        local j = 7 * i
        if pend[j - 5] > 0 then
          COMMIT[pend[j - 6]](KEYS[k + i], now, pend[j - 5], pend[j - 4], pend[j - 3], pend[j - 2], pend[j - 1], pend[j])
        end
      end
    else
      for i = 1, p do
        local j = base + 4 * (i - 1)
        if out[j + 1] == 1 then out[j + 2] = out[j + 2] + pend[7 * i - 5] end
      end
    end
    k = k + p
  end
  return out
end
