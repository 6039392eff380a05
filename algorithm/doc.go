// Package algorithm holds Floodgate's rate-limiting algorithms as pure
// functions: (state, now, params, cost) -> (new state, result). No I/O, no
// clock, no locks; stores call them under their own atomicity. The state
// and the result are passed by pointer, the state updated in place only
// when a cost is admitted: a decision runs on every request, and returning
// both structs by value costs about a third of an in-memory decision. This is the
// reference model: the Redis scripts repeat the same integer arithmetic, and
// the storetest suite checks that every store agrees with it.
//
// # Units and exactness
//
// Time is int64 microseconds since the Unix epoch (Redis TIME has the same
// resolution). All arithmetic is on integers. Where a rate is fractional,
// quantities are scaled by the window W (in µs): a bucket holding k tokens
// is k·W "scaled units", refilled by Q scaled units per elapsed µs. The
// largest intermediate value is Capacity·W + Q, which Policy.Validate keeps
// at or below 2^53 so that Lua numbers (IEEE doubles) hold it exactly too.
//
// # Cost and peek
//
// A request of cost c is admitted iff c ≤ avail, the whole units available
// now; when admitted, Remaining = avail − c. Cost 0 is a peek: it changes no
// state, Remaining = avail, and Allowed/RetryAfter are those of a cost of 1.
// When denied, Remaining = avail and RetryAfter is the exact time until c
// fits if nothing else is spent meanwhile (rounded up to whole µs).
//
// # Fixed window (REQUIREMENTS A1)
//
// Windows are aligned to multiples of W since the epoch, so every process
// agrees on them: start = now − now mod W. A calendar period (a month in
// a time zone) is no multiple of anything: the caller finds the period
// that holds now and passes its start and length as Params.Start and W. State: A = start, B = count,
// W = the window.
// avail = Q − count; ResetAfter = start + W − now; a denied cost fits at
// the next window, so RetryAfter = ResetAfter. The known flaw is kept:
// Q units at the end of one window and Q more at the start of the next
// pass within a few µs of each other, up to 2Q across a boundary.
//
// # Anchored window
//
// A fixed window that each key opens with the first request it is
// charged for, at that request's time, instead of at a multiple of W: the
// keys' windows do not all end at once. State: A = start, B = count, W =
// the window; the zero State is a key with no window. The window is open
// while now < start + W; a cost admitted when it is not opens one at now.
// avail = Q − count (Q when no window is open); ResetAfter = start + W −
// now while a window is open, 0 when nothing is used; a denied cost fits
// once the window has ended, so RetryAfter = ResetAfter. The fixed
// window's flaw is kept, per key: Q units at the end of a key's window and
// Q more right after pass within a few µs of each other.
//
// # Sliding window log (A2)
//
// A Log keeps (time, cost) entries; an entry at time a counts while
// now < a + W. avail = Q − Σcost. RetryAfter walks the entries from the
// oldest until enough leave the window for c to fit: it is a_i + W − now
// for the first entry a_i whose leaving frees enough. ResetAfter is when the
// oldest entry leaves (when quota next grows). Exact; memory grows with
// traffic, up to Q entries (entries in the same µs are merged).
//
// # Sliding window counter (A3)
//
// Two aligned counters: prev (window before) and curr (this window). With
// e = now − start, the estimate is prev·(W−e)/W + curr, and a cost c is
// admitted iff estimate + c ≤ Q, evaluated in integers as
// prev·(W−e) + (curr+c)·W ≤ Q·W. avail = ⌊(Q·W − prev·(W−e) − curr·W)/W⌋.
// RetryAfter is exact: if a = Q − c − curr ≥ 0, the estimate lets c in
// once prev·(W−e′) ≤ a·W, i.e. at e′ = W − ⌊a·W/prev⌋; otherwise only the
// next window can, where prev′ = curr, at e″ = W − ⌊(Q−c)·W/curr⌋ past its
// start. ResetAfter is the same wait for Remaining + 1 units: when the
// decaying estimate frees the next unit (0 when nothing is used). It is
// usually well before the window's end, which a client pacing itself by
// "no more than r within t" would otherwise wait for. It comes sooner the
// more the window spent, as a larger count decays faster, so it is no
// reset a client can plan by: Full, the same wait for all Q units, is when
// the estimate is back to zero — the end of the next window once this one
// has spent, of this one when only the previous one did, 0 when nothing
// is used. It only moves later as a client spends or waits
// (TestCounterFullNeverEarlier), and X-RateLimit-Reset reports it.
// State: A = start, B = curr, C = prev, W = the window.
//
// # Token bucket (A4) and GCRA
//
// Capacity C (the policy's Burst, else Q), refill Q per W, starting full.
// Both are computed on the bucket's debt d = (C − tokens)·W in scaled units:
// after e µs, d = max(0, d − e·Q), so after a long idle the bucket holds
// exactly C, never more. avail = ⌊(C·W − d)/W⌋; admitting c adds c·W to d;
// RetryAfter = ⌈(d + c·W − C·W)/Q⌉ µs = (c − tokens)/rate. ResetAfter is the
// time until one more whole unit accrues (0 when full), so RateLimit's t
// never overstates the pace.
//
// The token bucket stores (A = last update, B = d, W). GCRA stores the
// theoretical arrival time TAT = A + B/Q µs exactly (B < Q), with emission
// interval T = W/Q and tolerance C·T: a cost c is admitted iff
// max(TAT, now) + c·T − now ≤ C·T. Since d = (TAT − now)·Q, both admit
// exactly the same sequences; a randomized test checks it. GCRA also keeps
// the quota its TAT was computed for (C = Q) and W: under another quota the same
// TAT would stand for another debt, so a raised quota would refuse what the
// old one admitted. Read back through the quota it was written with, the
// debt in units × W is the same under any quota, as the token bucket's is.
//
// # Post-charges and refunds
//
// A post-charge (PostFixedWindow, …, Log.Post) counts a cost whatever is
// left: a charge that arrives after the work, such as the tokens an
// answer used. It may take the key past its quota, into debt; a decision
// then reports Remaining 0 and ResetAfter until the next unit is free
// again, and refuses until the debt is repaid:
//
//   - fixed window: the count passes Q; the debt ends with the window;
//   - anchored window: as the fixed window, in the key's window, which a
//     post-charge opens if the key has none;
//   - sliding window log: an entry like any other; the debt is repaid as
//     entries leave, and ResetAfter, while the log holds more than Q, is
//     when enough have left for one unit (not when the oldest leaves);
//   - sliding window counter: curr passes Q and weighs into the next
//     window as prev, so the debt is repaid within two windows;
//   - token bucket and GCRA: the debt d passes C·W; refill repays it at Q
//     per W, and one unit is free again after ⌈(d − C·W + W)/Q⌉ µs.
//
// Every algorithm has one: a post-charge is a count for the window ones
// and a debt for the bucket ones. To stay exact in the Redis store's Lua
// numbers, a count stops at 2^53 (the sliding counter's at ⌊2^53/W⌋) and
// a debt at 2^53 − Q (or C·W, if more); floodgate.CheckCost refuses a
// post-charge above 2^53.
//
// A refund (RefundFixedWindow, …, Log.Refund) gives back n units of a
// cost admitted at time at, never below an empty state: the fixed and
// anchored windows only to at's window if the state still counts it, the sliding counter to
// curr or prev (whichever holds at's window), the log from the entries at
// or after at (newest first), the buckets off the debt (which needs no
// time: the debt decays from the last update whatever it is, and
// max(0, max(0, d − e·Q) − n·W) = max(0, d − n·W − e·Q)).
//
// # Policy changes
//
// A policy changed under the same name keeps the state's meaning in units
// spent, so that a raise — a capacity (burst, or quota) at least as large
// and a rate Q/W at least as high, under any window — never refuses a
// request the old policy would have admitted, and Remaining is what the
// new policy leaves (TestRaise, TestWindowChange). Every state keeps the
// window it was written under (State.W; the log its own), and is read in
// the policy's window at each decision: the first admission writes it in
// the new form (the log moves its entries at the first decision). A state
// written before the window was kept (W = 0) is read as written under the
// policy's window.
//
//   - Token bucket and GCRA: the debt d, units × W0, is read as ⌈d·W/W0⌉
//     (exact in 128 bits; Lua builds the product bit by bit), the same
//     units owed. The token bucket then refills from its last update at
//     the new rate; GCRA's TAT, read through the quota it was written
//     with, drained at the old rate until now. A debt of the new capacity
//     or more reads as an empty bucket.
//   - Sliding window counter: the estimate under W0 at now, rounded up to
//     whole units (at most the quota), is counted in the current window
//     under W, and decays from there as any count of it does. Remaining is
//     the new quota less what the old estimate still held (and less the
//     request's cost).
//   - Sliding window log: an entry leaves when the window it was admitted
//     under lets it go, or sooner under a shorter window; under a longer
//     one every entry moves back by W − W0 (to the epoch's first µs at most).
//   - Fixed window: a count under another window belongs to a window that
//     no longer exists; the count restarts in the current window under W.
//     The anchored window's likewise: the key's next request opens a window
//     under W.
//     Under a raise that admits more than the old policy would: Remaining
//     is what the new window leaves of what was spent in it since the
//     change, and the units spent before are not counted.
//
// A lowered limit reads the same units against less: the counts and the
// debts may exceed the new capacity, and then nothing is available until
// they drain (across a window change, a bucket's debt or a counter's
// estimate above the new capacity reads as the capacity). Stores drop
// a state once the policy that wrote it would hold nothing more (Expires),
// which under a lowered rate may be before the new policy would.
package algorithm
