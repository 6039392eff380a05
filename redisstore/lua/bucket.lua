-- The arithmetic the token bucket and GCRA share, on the debt
-- d = (capacity - tokens) * W in scaled units (see package algorithm).

-- rescale reads debt d, in units * w0 (the window it was written under; 0
-- when not kept), in the policy's window w: ceil(d * w / w0), the same
-- units owed (algorithm.rescale). A debt of the whole capacity or more
-- reads as an empty bucket, which keeps the product below 2^53.
local function rescale(d, w0, cap, w)
  if w0 == 0 or w0 == w or d <= 0 then return d end
  if idiv(d, w0) >= cap then return cap * w end
  local q, r = muldiv(d, w, w0)
  if r > 0 then q = q + 1 end
  return q
end

-- next_unit is the time (µs) until the next whole unit accrues; 0 when full.
local function next_unit(debt, full, q, w)
  if debt <= 0 then return 0 end
  local gap
  if debt > full then
    gap = debt - full + w
  else
    gap = w - mod(full - debt, w)
  end
  return ceildiv(gap, q)
end

-- bucket returns allowed, remaining, reset, retry and the debt after cost.
local function bucket(debt, q, cap, w, cost)
  if debt <= 0 then
    -- A full bucket, the usual state of a key below its limit: the general
    -- arithmetic below with debt 0, worked out (the next unit after cost
    -- whole units is one unit's time away).
    local c = max(cost, 1)
    if c > cap then return 0, cap, 0, ceildiv((c - cap) * w, q), 0 end
    if cost == 0 then return 1, cap, 0, 0, 0 end
    return 1, cap - cost, ceildiv(w, q), 0, cost * w
  end
  local full = cap * w
  local avail = max(idiv(full - debt, w), 0)
  local reset = next_unit(debt, full, q, w)
  local c = max(cost, 1)
  if c > avail then
    -- (debt - full) first keeps the sum within 2^53.
    return 0, avail, reset, ceildiv((debt - full) + c * w, q), debt
  end
  if cost == 0 then return 1, avail, reset, 0, debt end
  debt = debt + cost * w
  return 1, avail - cost, next_unit(debt, full, q, w), 0, debt
end

-- owe_debt adds cost units to debt, up to 2^53 - q or an empty bucket,
-- whichever is more (algorithm.owe). cost * w past 2^53 is inexact, but
-- then above room all the same.
local function owe_debt(debt, cost, q, cap, w)
  local limit = max(MAXEXACT - q, cap * w)
  local room = limit - debt
  if room <= 0 or cost * w >= room then return max(debt, limit) end
  return debt + cost * w
end

-- A bucket's key must outlive the state's difference from a full bucket,
-- which every admitted cost pushes later; moving a key's expiry costs
-- Redis more than the rest of the write. So the expiry is set with
-- headroom, HEADROOM (µs) or the policy's window if shorter, past the time
-- needed, and kept (KEEPTTL) while it still covers the time needed: a busy
-- key below its limit moves its expiry about once a HEADROOM, and an idle
-- key lives at most HEADROOM longer. The expiry set is kept in the state
-- (E, see load), so that the next write knows it.
local HEADROOM = 1000000

-- expiry returns the expiry (µs) of a key whose state differs from a full
-- bucket until needed, and whether the key keeps its TTL: set is the
-- expiry the key was given (its state's E; 0 when unknown). The TTL is
-- kept only while set lies within the headroom past needed: an E further
-- away (the time needed came earlier under a raised policy, or the state
-- is not one this code wrote, E infinite or NaN) is moved, so that the key
-- still lives at most the headroom longer than its state needs.
local function expiry(needed, set, w)
  local room = HEADROOM
  if w < room then room = w end
  if set >= needed and set - needed <= room then return set, true end
  return needed + room, false
end

-- hold is the commit of the token bucket and GCRA: put's, with the key's
-- expiry exp kept in the state, as (a, b, exp, w), or (a, b, c, w, exp)
-- when c is not nil.
local function hold(key, now, _, a, b, c, exp, keep, w)
  local v
  if c then v = pack('>ddddd', a, b, c, w, exp) else v = pack('>dddd', a, b, exp, w) end
  write(key, v, now, exp, keep)
end
