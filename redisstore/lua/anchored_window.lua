-- Anchored window: state (start, count, window) of the window the key
-- opened with its first charged request (algorithm.AnchoredWindow). The
-- TTL is set by the request that opens the window, at its end, and kept
-- (KEEPTTL) by the later ones. A state written under another window is a
-- window that has ended. Loaded only by a call that uses it (see
-- dispatch.lua).
local function anchored_window()
  -- current reads the state at now: the open window's start, its count
  -- and true, or now, 0 and false when the key has no open window.
  local function current(key, now, w)
    local found, sa, sb, _, sw = load(key, false)
    if found and sw == w and now < sa + w then return sa, sb, true end
    return now, 0, false
  end

  local function take(key, now, q, _, w, cost)
    local start, count, open = current(key, now, w)
    local avail = max(q - count, 0)
    -- Nothing is used until a cost opens a window.
    local reset = 0
    if open then reset = start + w - now end
    if max(cost, 1) > avail then return 0, avail, reset, reset, 0 end
    if cost == 0 then return 1, avail, reset, 0, 0 end
    return 1, avail - cost, start + w - now, 0, 0, start, count + cost, nil, start + w, open
  end

  -- owe adds cost to the count of the key's window, opening one at now if
  -- it has none, whatever the quota (algorithm.PostAnchoredWindow).
  local function owe(key, now, _, _, w, cost)
    local start, count, open = current(key, now, w)
    count = count + cost
    if count > MAXEXACT then count = MAXEXACT end
    put(key, now, cost, start, count, nil, start + w, open, w)
  end

  -- refund gives n back to the key's window if it held time at
  -- (algorithm.RefundAnchoredWindow), keeping the key's TTL.
  local function refund(key, at, _, _, w, n)
    local found, sa, sb, _, sw = load(key, false)
    if not found or sw ~= w or at < sa or at >= sa + w then return end
    put(key, at, n, sa, max(sb - n, 0), nil, 0, true, w)
  end
  return take, put, owe, refund
end
