-- Sliding window log (A2). A sorted set holds one member per microsecond
-- that admitted something, scored by that time and named "<time>" for a
-- cost of 1 or "<time>:<cost>" otherwise: requests within one microsecond
-- are merged into one member, so members never collide. The member
-- "n<window>" is scored minus the total cost held (below every time), so
-- no call has to sum the log, and names the window (µs) the entries were
-- admitted under; rank 1 is then the oldest entry. Earlier versions named
-- it "n", without the window, which is then taken to be the policy's.
-- Loaded only by a call that uses it (see dispatch.lua).
local function sliding_log()
  local function log_cost(m) return tonumber(match(m, ':(%d+)$')) or 1 end

  local function entry(at, n)
    if n == 1 then return int(at) end
    return int(at) .. ':' .. int(n)
  end

  -- rewindow makes w the window of the log at key, whose entries were
  -- admitted under w0 and whose total members (one, or "n" beside it from
  -- an earlier version) are named in sp: under a longer window every entry
  -- moves back by w - w0 (never before the epoch's first µs), and is
  -- renamed after its new time, so that it still leaves at its time + w0
  -- (algorithm.Log.rewindow).
  local function rewindow(key, sp, total, w0, w)
    local es = {}
    if w > w0 then es = call('ZRANGEBYSCORE', key, '(0', '+inf', 'WITHSCORES') end
    if #es > 0 then
      local d = w - w0
      if tonumber(es[2]) - 1 < d then d = tonumber(es[2]) - 1 end
      call('ZREMRANGEBYSCORE', key, '(0', '+inf')
      for j = 1, #es, 2 do
        local at = tonumber(es[j + 1]) - d
        call('ZADD', key, int(at), entry(at, log_cost(es[j])))
      end
    end
    for j = 1, #sp, 2 do call('ZREM', key, sp[j]) end
    call('ZADD', key, int(-total), 'n' .. int(w))
  end

  -- total_of reads the log at key in window w: the total cost its entries
  -- hold, after moving them to w if it is not their window.
  local function total_of(key, w)
    local sp = call('ZRANGEBYSCORE', key, '-inf', '(0', 'WITHSCORES')
    local total, w0 = 0, w
    for j = 1, #sp, 2 do
      total = total - tonumber(sp[j + 1])
      w0 = tonumber(match(sp[j], '^n(%d+)$')) or w0
    end
    if #sp > 2 or (#sp == 2 and sp[1] ~= 'n' .. int(w)) then rewindow(key, sp, total, w0, w) end
    return total
  end

  -- prune drops the entries that left the window at now and returns the
  -- total the log then holds.
  local function prune(key, now, w, total)
    if total > 0 then
      local cutoff = int(now - w)
      local old = call('ZRANGEBYSCORE', key, '(0', cutoff)
      if #old > 0 then
        for j = 1, #old do total = total - log_cost(old[j]) end
        if total > 0 then
          call('ZREMRANGEBYSCORE', key, '(0', cutoff)
          call('ZADD', key, int(-total), 'n' .. int(w))
        else
          call('DEL', key)
          total = 0
        end
      end
    end
    return total
  end

  -- wait walks from the oldest entry until enough cost has left the window
  -- for c units to fit (algorithm.Log.wait).
  local function wait(key, now, q, w, total, c)
    local need, from = total + c - q, 1
    while true do
      local es = call('ZRANGE', key, from, from + 63, 'WITHSCORES')
      if #es == 0 then return 0 end
      for j = 1, #es, 2 do
        need = need - log_cost(es[j])
        if need <= 0 then return tonumber(es[j + 1]) + w - now end
      end
      from = from + 64
    end
  end

  local function take(key, now, q, cap, w, cost)
    local total = prune(key, now, w, total_of(key, w))
    local avail = max(q - total, 0)
    local reset = 0
    if total > q then
      reset = wait(key, now, q, w, total, 1) -- in debt: the next unit frees later
    elseif total > 0 then
      reset = tonumber(call('ZRANGE', key, 1, 1, 'WITHSCORES')[2]) + w - now
    end
    local c = max(cost, 1)
    if c > avail then return 0, avail, reset, wait(key, now, q, w, total, c), 0 end
    if cost == 0 then return 1, avail, reset, 0, 0 end
    if total == 0 then reset = w end
    return 1, avail - cost, reset, 0, 0, nil, total, w
  end

  -- held is the total cost in the log before this request; w the window.
  local function commit(key, now, cost, _, held, w)
    local at, n = now, cost
    local last = call('ZRANGE', key, -1, -1, 'WITHSCORES')
    if last[1] and tonumber(last[2]) > 0 then
      local la = tonumber(last[2])
      -- A clock that stepped back records at the newest entry's time, as the
      -- algorithm package does.
      if la >= now then
        at, n = la, n + log_cost(last[1])
        call('ZREM', key, last[1])
      end
    end
    call('ZADD', key, int(-(held + cost)), 'n' .. int(w), int(at), entry(at, n))
    call('PEXPIRE', key, ttl(at + w, now))
  end

  -- owe records cost at now whatever the quota (algorithm.Log.Post).
  local function owe(key, now, q, cap, w, cost)
    commit(key, now, cost, nil, prune(key, now, w, total_of(key, w)), w)
  end

  -- refund gives n back from the entries admitted at or after at, the
  -- newest first (algorithm.Log.Refund), keeping the key's TTL.
  local function refund(key, at, q, cap, w, n)
    local total = total_of(key, w)
    if total == 0 then return end
    local es = call('ZRANGEBYSCORE', key, int(at), '+inf', 'WITHSCORES')
    local back, j = 0, #es - 1
    while j >= 1 and n > back do
      local m, t = es[j], tonumber(es[j + 1])
      local c = log_cost(m)
      local d = c
      if n - back < d then d = n - back end
      call('ZREM', key, m)
      if c > d then call('ZADD', key, int(t), entry(t, c - d)) end
      back, j = back + d, j - 2
    end
    if back == 0 then return end
    if total > back then
      call('ZADD', key, int(-(total - back)), 'n' .. int(w))
    else
      call('DEL', key)
    end
  end
  return take, commit, owe, refund
end
