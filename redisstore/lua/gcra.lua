-- GCRA: state (A, B, C, W, E), the theoretical arrival time TAT = A + B/C µs
-- with B < C, C the quota and W the window it was computed for (absent in
-- older states: the policy's), and E, the key's expiry, after the TAT (see
-- expiry in bucket.lua).
-- Loaded only by a call that uses it (see dispatch.lua).
local function gcra()
  local function take(key, now, q, cap, w, cost)
    local _, sa, sb, sc, sw, se = load(key, true)
    if sc == 0 then sc = q end
    local debt = 0
    if sa > now or (sa == now and sb > 0) then debt = rescale((sa - now) * sc + sb, sw, cap, w) end
    local ok, rem, reset, retry, after = bucket(debt, q, cap, w, cost)
    if ok == 1 and cost > 0 then
      local whole = idiv(after, q)
      local ta, tb = now + whole, after - whole * q
      local needed = ta
      if tb > 0 then needed = ta + 1 end
      local exp, keep = expiry(needed, se, w)
      return ok, rem, reset, retry, 0, ta, tb, q, exp, keep
    end
    return ok, rem, reset, retry, 0
  end
  return take, hold
end
