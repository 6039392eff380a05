-- Fixed window (REQUIREMENTS A1): state (start, count, window). The TTL
-- is set when a window's first request creates the key and kept (KEEPTTL)
-- by the later ones, so it is never pushed back by traffic. A state written
-- under another window restarts the count (algorithm.FixedWindow).
-- Loaded only by a call that uses it (see dispatch.lua). With calendar
-- set (the wire code of a floodgate.Calendar policy), the capacity
-- argument, which a fixed window has no use for, is the start (µs) of the
-- calendar period the caller found to hold the time, and w its length.
local function fixed_window(calendar)
  local function start_of(t, cap, w)
    if calendar then return cap end
    return t - mod(t, w)
  end

  -- current reads the state at now: the window's start, its count, and
  -- whether the state is of that window.
  local function current(key, now, cap, w)
    local found, sa, sb, _, sw = load(key, false)
    local start = start_of(now, cap, w)
    found = found and (sw == 0 or sw == w)
    if found then start = max(start, sa) end
    local same, count = found and sa == start, 0
    if same then count = sb end
    return start, count, same
  end

  local function take(key, now, q, cap, w, cost)
    local start, count, same = current(key, now, cap, w)
    local avail = max(q - count, 0)
    -- Past a calendar period's end only if the caller's clock lags the
    -- server's: the period ends now.
    local reset = max(start + w - now, 0)
    if max(cost, 1) > avail then return 0, avail, reset, reset, 0 end
    if cost == 0 then return 1, avail, reset, 0, 0 end
    return 1, avail - cost, reset, 0, 0, start, count + cost, nil, start + w, same
  end
  -- owe adds cost to the count of the window at now, whatever the quota
  -- (algorithm.PostFixedWindow).
  local function owe(key, now, q, cap, w, cost)
    local start, count, same = current(key, now, cap, w)
    count = count + cost
    if count > MAXEXACT then count = MAXEXACT end
    put(key, now, cost, start, count, nil, start + w, same, w)
  end

  -- refund gives n back to the window that held time at, if the state's
  -- window holds it (algorithm.RefundFixedWindow), keeping the key's TTL.
  local function refund(key, at, q, cap, w, n)
    local found, sa, sb, _, sw = load(key, false)
    if sw == 0 then sw = w end
    if not found or at < sa or at >= sa + sw then return end
    put(key, at, n, sa, max(sb - n, 0), nil, 0, true, sw)
  end
  return take, put, owe, refund
end
