-- Fixed window (REQUIREMENTS A1): state (start, count, window). The TTL
-- is set when a window's first request creates the key and kept (KEEPTTL)
-- by the later ones, so it is never pushed back by traffic. A state written
-- under another window restarts the count (algorithm.FixedWindow).
-- Loaded only by a call that uses it (see dispatch.lua).
local function fixed_window()
  -- current reads the state at now: the window's start, its count, and
  -- whether the state is of that window.
  local function current(key, now, w)
    local found, sa, sb, _, sw = load(key, false)
    local start = now - mod(now, w)
    found = found and (sw == 0 or sw == w)
    if found then start = max(start, sa) end
    local same, count = found and sa == start, 0
    if same then count = sb end
    return start, count, same
  end

  local function take(key, now, q, cap, w, cost)
    local start, count, same = current(key, now, w)
    local avail = max(q - count, 0)
    local reset = start + w - now
    if max(cost, 1) > avail then return 0, avail, reset, reset, 0 end
    if cost == 0 then return 1, avail, reset, 0, 0 end
    return 1, avail - cost, reset, 0, 0, start, count + cost, nil, start + w, same
  end
  -- owe adds cost to the count of the window at now, whatever the quota
  -- (algorithm.PostFixedWindow).
  local function owe(key, now, q, cap, w, cost)
    local start, count, same = current(key, now, w)
    count = count + cost
    if count > MAXEXACT then count = MAXEXACT end
    put(key, now, cost, start, count, nil, start + w, same, w)
  end

  -- refund gives n back to the window that held time at
  -- (algorithm.RefundFixedWindow), keeping the key's TTL.
  local function refund(key, at, q, cap, w, n)
    local found, sa, sb, _, sw = load(key, false)
    if not found or not (sw == 0 or sw == w) or sa ~= at - mod(at, w) then return end
    put(key, at, n, sa, max(sb - n, 0), nil, 0, true, w)
  end
  return take, put, owe, refund
end
