-- Sliding window log (A2). A sorted set holds one member per microsecond
-- that admitted something, scored by that time and named "<time>" for a
-- cost of 1 or "<time>:<cost>" otherwise: requests within one microsecond
-- are merged into one member, so members never collide. The member "n" is
-- scored minus the total cost held (below every time), so no call has to
-- sum the log; rank 1 is then the oldest entry.
-- Loaded only by a call that uses it (see dispatch.lua).
local function sliding_log()
  local function log_cost(m) return tonumber(match(m, ':(%d+)$')) or 1 end

  local function take(key, now, q, cap, w, cost)
    local total = 0
    local n = call('ZSCORE', key, 'n')
    if n then
      total = -tonumber(n)
      local cutoff = int(now - w)
      local old = call('ZRANGEBYSCORE', key, '(0', cutoff)
      if #old > 0 then
        for j = 1, #old do total = total - log_cost(old[j]) end
        if total > 0 then
          call('ZREMRANGEBYSCORE', key, '(0', cutoff)
          call('ZADD', key, int(-total), 'n')
        else
          call('DEL', key)
          total = 0
        end
      end
    end
    local avail = max(q - total, 0)
    local reset = 0
    if total > 0 then reset = tonumber(call('ZRANGE', key, 1, 1, 'WITHSCORES')[2]) + w - now end
    local c = max(cost, 1)
    if c > avail then
      -- Walk from the oldest entry until enough cost has left the window.
      local need, from, retry = total + c - q, 1, 0
      while retry == 0 do
        local es = call('ZRANGE', key, from, from + 63, 'WITHSCORES')
        if #es == 0 then break end
        for j = 1, #es, 2 do
          need = need - log_cost(es[j])
          if need <= 0 then
            retry = tonumber(es[j + 1]) + w - now
            break
          end
        end
        from = from + 64
      end
      return 0, avail, reset, retry
    end
    if cost == 0 then return 1, avail, reset, 0 end
    if total == 0 then reset = w end
    return 1, avail - cost, reset, 0, nil, total, w
  end

  -- held is the total cost in the log before this request; w the window.
  local function commit(key, now, cost, _, held, w)
    local at, n = now, cost
    local last = call('ZRANGE', key, -1, -1, 'WITHSCORES')
    if last[1] and last[1] ~= 'n' then
      local la = tonumber(last[2])
      -- A clock that stepped back records at the newest entry's time, as the
      -- algorithm package does.
      if la >= now then
        at, n = la, n + log_cost(last[1])
        call('ZREM', key, last[1])
      end
    end
    local member = int(at)
    if n ~= 1 then member = member .. ':' .. int(n) end
    call('ZADD', key, int(-(held + cost)), 'n', int(at), member)
    call('PEXPIRE', key, ttl(at + w, now))
  end
  return take, commit
end
