-- Fixed window (REQUIREMENTS A1): state (start, count, window). The TTL
-- is set when a window's first request creates the key and kept (KEEPTTL)
-- by the later ones, so it is never pushed back by traffic. A state written
-- under another window restarts the count (algorithm.FixedWindow).
-- Loaded only by a call that uses it (see dispatch.lua).
local function fixed_window()
  local function take(key, now, q, cap, w, cost)
    local found, sa, sb, _, sw = load(key, false)
    local start = now - mod(now, w)
    found = found and (sw == 0 or sw == w)
    if found then start = max(start, sa) end
    local same, count = found and sa == start, 0
    if same then count = sb end
    local avail = max(q - count, 0)
    local reset = start + w - now
    if max(cost, 1) > avail then return 0, avail, reset, reset, 0 end
    if cost == 0 then return 1, avail, reset, 0, 0 end
    return 1, avail - cost, reset, 0, 0, start, count + cost, nil, start + w, same
  end
  return take, put
end
