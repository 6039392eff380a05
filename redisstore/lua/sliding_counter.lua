-- Sliding window counter (A3): state (start, curr, prev, window). The
-- expiry, start + 2W, moves only when a new window starts; within a window
-- the TTL is kept.
-- Loaded only by a call that uses it (see dispatch.lua).
local function sliding_counter()
  -- The exact wait (µs) from e until c units fit; algorithm.counterWait.
  local function counter_wait(c, prev, curr, e, q, w)
    local a = q - c - curr
    if a >= 0 then
      if prev == 0 then return 0 end
      return max(w - idiv(a * w, prev) - e, 0)
    end
    return w - e + w - idiv((q - c) * w, curr)
  end

  -- counters reads the state at now: the start of the policy's current
  -- window, its two counters, and whether the state is of that window. A
  -- state written under another window counts what its estimate still
  -- holds, rounded up (at most q), in the current window (algorithm.counters).
  local function counters(key, now, q, w)
    local found, sa, sb, sc, sw = load(key, true)
    if sw == 0 then sw = w end
    local start = now - mod(now, sw)
    local prev, curr, same = 0, 0, false
    if found and sa >= start then
      start, curr, prev, same = sa, sb, sc, true
    elseif found and sa == start - sw then
      prev = sb
    end
    if sw == w then return start, curr, prev, same end
    local held = curr + ceildiv(prev * (sw - max(now - start, 0)), sw)
    if held > q then held = q end
    return now - mod(now, w), held, 0, false
  end

  local function take(key, now, q, cap, w, cost)
    local start, curr, prev, same = counters(key, now, q, w)
    local e = max(now - start, 0)
    local used = prev * (w - e) + curr * w
    local avail = max(idiv(q * w - used, w), 0)
    local c = max(cost, 1)
    if c > avail then
      return 0, avail, counter_wait(avail + 1, prev, curr, e, q, w), counter_wait(c, prev, curr, e, q, w),
        counter_wait(q, prev, curr, e, q, w)
    end
    -- ResetAfter: when the next unit after this request frees; full: when
    -- the whole quota is (algorithm.Result.Full).
    local rem = avail - cost
    local reset, full = 0, 0
    if rem < q then
      reset = counter_wait(rem + 1, prev, curr + cost, e, q, w)
      full = counter_wait(q, prev, curr + cost, e, q, w)
    end
    if cost == 0 then return 1, avail, reset, 0, full end
    return 1, rem, reset, 0, full, start, curr + cost, prev, start + 2 * w, same
  end
  -- owe adds cost to this window's count, whatever the quota; the count
  -- stops at floor(2^53 / w) (algorithm.PostSlidingWindowCounter).
  local function owe(key, now, q, cap, w, cost)
    local start, curr, prev, same = counters(key, now, q, w)
    curr = curr + cost
    local most = idiv(MAXEXACT, w)
    if curr > most then curr = most end
    put(key, now, cost, start, curr, prev, start + 2 * w, same, w)
  end

  -- refund gives n back to the counter of the window that held time at
  -- (algorithm.RefundSlidingWindowCounter), keeping the key's TTL.
  local function refund(key, at, q, cap, w, n)
    local found, sa, sb, sc, sw = load(key, true)
    if not found or not (sw == 0 or sw == w) then return end
    local start = at - mod(at, w)
    if sa == start then
      sb = max(sb - n, 0)
    elseif sa == start + w then
      sc = max(sc - n, 0)
    else
      return
    end
    put(key, at, n, sa, sb, sc, 0, true, w)
  end
  return take, put, owe, refund
end
