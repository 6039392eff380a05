-- Sliding window counter (A3): state "start:curr:prev". The expiry,
-- start + 2W, moves only when a new window starts; within a window the TTL
-- is kept.
local function sliding_counter_take(i, key, now, q, cap, w, cost)
  local found, sa, sb, sc = load(key)
  local start = now - mod(now, w)
  local prev, curr, same = 0, 0, false
  if found and sa >= start then
    start, curr, prev, same = sa, sb, sc, true
  elseif found and sa == start - w then
    prev = sb
  end
  local e = max(now - start, 0)
  local used = prev * (w - e) + curr * w
  local avail = max(idiv(q * w - used, w), 0)
  local reset = start + w - now
  local c = max(cost, 1)
  if c > avail then
    local a, retry = q - c - curr, 0
    if a >= 0 then
      retry = w - idiv(a * w, prev) - e
    else
      retry = reset + w - idiv((q - c) * w, curr)
    end
    return 0, avail, reset, retry
  end
  if cost == 0 then return 1, avail, reset, 0 end
  PA[i], PB[i], PC[i], PX[i], PK[i] = start, curr + cost, prev, start + 2 * w, same
  return 1, avail - cost, reset, 0
end

local function sliding_counter_commit(i, key, now)
  local v = int(PA[i]) .. ':' .. int(PB[i]) .. ':' .. int(PC[i])
  if PK[i] then
    call('SET', key, v, 'KEEPTTL')
  else
    call('SET', key, v, 'PX', ttl(PX[i], now))
  end
end
