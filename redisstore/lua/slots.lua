-- In-flight slots (floodgate.Slots): a sorted set per key and cap whose
-- members are holders' tokens (24 hex digits) scored by the end of their
-- lease (server ms). A slot's request is decided by the dispatcher in the
-- same call as any other request (see dispatch.lua for its layout); its
-- times are always the server's, since the set expires on the server's
-- clock.

-- HEX formats a 12-byte token as the 24 hex digits of its member name.
local HEX = '%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x'

-- acquire takes one slot of key for request r (its cap and lease from byte
-- 10 on, then its token) at now (µs): ended leases are dropped first, so a
-- holder that crashed gives its slots back when its leases end; the set
-- expires with its last lease. It returns allowed (1/0) and the slots free
-- after it (0 when refused).
local function acquire(key, now, r)
  local quota, lease = unpack('>dd', r, 10)
  local ms = floor(now / 1000)
  call('ZREMRANGEBYSCORE', key, '-inf', ms)
  local n = call('ZCARD', key)
  if n >= quota then return 0, 0 end
  call('ZADD', key, ms + lease, format(HEX, byte(r, 26, 37)))
  local last = call('ZRANGE', key, -1, -1, 'WITHSCORES')
  call('PEXPIREAT', key, tonumber(last[2]))
  return 1, quota - n - 1
end

-- release gives back the slot of key held by the token of request r (from
-- byte 10 on), and returns 1, or 0 if it was not held (released before, or
-- its lease ended).
local function release(key, r)
  return call('ZREM', key, format(HEX, byte(r, 10, 21)))
end
