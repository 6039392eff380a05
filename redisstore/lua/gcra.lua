-- GCRA: state "A:B", the theoretical arrival time TAT = A + B/Q µs with
-- B < Q, expiring at the TAT.
-- Loaded only by a call that uses it (see dispatch.lua).
local function gcra()
  local function take(i, key, now, q, cap, w, cost)
    local _, sa, sb = load(key)
    local debt = 0
    if sa > now or (sa == now and sb > 0) then debt = (sa - now) * q + sb end
    local ok, rem, reset, retry, after = bucket(debt, q, cap, w, cost)
    if ok == 1 and cost > 0 then
      local whole = idiv(after, q)
      PA[i], PB[i] = now + whole, after - whole * q
      PX[i] = PA[i]
      if PB[i] > 0 then PX[i] = PX[i] + 1 end
    end
    return ok, rem, reset, retry
  end

  local function commit(i, key, now)
    call('SET', key, pair(PA[i], PB[i]), 'PX', ttl(PX[i], now))
  end
  return take, commit
end
