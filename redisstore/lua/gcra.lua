-- GCRA: state (A, B, C, W, E), the theoretical arrival time TAT = A + B/C µs
-- with B < C, C the quota and W the window it was computed for (absent in
-- older states: the policy's), and E, the key's expiry, after the TAT (see
-- expiry in bucket.lua).
-- Loaded only by a call that uses it (see dispatch.lua).
local function gcra()
  -- debt_of is the debt the state stands for at now (algorithm.gcraDebt).
  local function debt_of(sa, sb, sc, sw, now, q, cap, w)
    if sc == 0 then sc = q end
    if sa > now or (sa == now and sb > 0) then return rescale((sa - now) * sc + sb, sw, cap, w) end
    return 0
  end

  -- tat is the TAT a debt after now stands for, and the key's expiry.
  local function tat(debt, now, q, se, w)
    local whole = idiv(debt, q)
    local ta, tb = now + whole, debt - whole * q
    local needed = ta
    if tb > 0 then needed = ta + 1 end
    local exp, keep = expiry(needed, se, w)
    return ta, tb, exp, keep
  end

  local function take(key, now, q, cap, w, cost)
    local _, sa, sb, sc, sw, se = load(key, true)
    local ok, rem, reset, retry, after = bucket(debt_of(sa, sb, sc, sw, now, q, cap, w), q, cap, w, cost)
    if ok == 1 and cost > 0 then
      local ta, tb, exp, keep = tat(after, now, q, se, w)
      return ok, rem, reset, retry, 0, ta, tb, q, exp, keep
    end
    return ok, rem, reset, retry, 0
  end

  -- owe moves the TAT on by cost, whatever the tolerance (algorithm.PostGCRA).
  local function owe(key, now, q, cap, w, cost)
    local _, sa, sb, sc, sw, se = load(key, true)
    local debt = owe_debt(debt_of(sa, sb, sc, sw, now, q, cap, w), cost, q, cap, w)
    local ta, tb, exp, keep = tat(debt, now, q, se, w)
    hold(key, now, cost, ta, tb, q, exp, keep, w)
  end

  -- refund moves the TAT back by n units (algorithm.RefundGCRA).
  local function refund(key, at, q, cap, w, n)
    local found, sa, sb, sc, sw, se = load(key, true)
    if not found or (sa == 0 and sb == 0) then return end
    if sc == 0 then sc = q end
    if sw == 0 then sw = w end
    local k = n * sw
    local d = idiv(k, sc)
    sa, sb = sa - d, sb - (k - d * sc)
    if sb < 0 then sa, sb = sa - 1, sb + sc end
    hold(key, at, n, sa, sb, sc, se, true, sw)
  end
  return take, hold, owe, refund
end
