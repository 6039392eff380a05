-- GCRA: state (A, B, C), the theoretical arrival time TAT = A + B/C µs with
-- B < C, C the quota it was computed for (absent in older states: the
-- current quota), expiring at the TAT.
-- Loaded only by a call that uses it (see dispatch.lua).
local function gcra()
  local function take(key, now, q, cap, w, cost)
    local _, sa, sb, sc = load(key)
    if sc == 0 then sc = q end
    local debt = 0
    if sa > now or (sa == now and sb > 0) then debt = (sa - now) * sc + sb end
    local ok, rem, reset, retry, after = bucket(debt, q, cap, w, cost)
    if ok == 1 and cost > 0 then
      local whole = idiv(after, q)
      local ta, tb = now + whole, after - whole * q
      local exp = ta
      if tb > 0 then exp = ta + 1 end
      return ok, rem, reset, retry, ta, tb, q, exp
    end
    return ok, rem, reset, retry
  end
  return take, put
end
