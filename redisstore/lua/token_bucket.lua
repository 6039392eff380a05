-- Token bucket (A4): state (last update, debt, expiry, window), expiring
-- after the bucket is full again (see expiry in bucket.lua).
-- Loaded only by a call that uses it (see dispatch.lua).
local function token_bucket()
  local function take(key, now, q, cap, w, cost)
    local _, sa, sb, _, sw, se = load(key, false)
    local t = max(now, sa) -- a clock that stepped back refills nothing
    local debt = rescale(sb, sw, cap, w) -- at the last update
    local e = t - sa
    if e >= ceildiv(debt, q) then
      debt = 0
    else
      debt = debt - e * q
    end
    local ok, rem, reset, retry, after = bucket(debt, q, cap, w, cost)
    local d = t - now -- durations count from t, the last update
    if d > 0 then
      if reset > 0 then reset = reset + d end
      if retry > 0 then retry = retry + d end
    end
    if ok == 1 and cost > 0 then
      local exp, keep = expiry(t + ceildiv(after, q), se, w)
      return ok, rem, reset, retry, 0, t, after, nil, exp, keep
    end
    return ok, rem, reset, retry, 0
  end
  -- owe adds cost to the debt at now, whatever the tokens left
  -- (algorithm.PostTokenBucket).
  local function owe(key, now, q, cap, w, cost)
    local _, sa, sb, _, sw, se = load(key, false)
    local t = max(now, sa)
    local debt = rescale(sb, sw, cap, w)
    if t - sa >= ceildiv(debt, q) then
      debt = 0
    else
      debt = debt - (t - sa) * q
    end
    debt = owe_debt(debt, cost, q, cap, w)
    local exp, keep = expiry(t + ceildiv(debt, q), se, w)
    hold(key, now, cost, t, debt, nil, exp, keep, w)
  end

  -- refund takes n units off the debt kept at the last update, in the
  -- window it was written under (algorithm.RefundTokenBucket).
  local function refund(key, at, q, cap, w, n)
    local found, sa, sb, _, sw, se = load(key, false)
    if not found then return end
    if sw == 0 then sw = w end
    hold(key, at, n, sa, max(sb - n * sw, 0), nil, se, true, sw)
  end
  return take, hold, owe, refund
end
