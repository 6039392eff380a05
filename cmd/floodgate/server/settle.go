package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/engine"
)

// SettleRequest is the body of POST /v1/settle.
type SettleRequest struct {
	// Reservation is the id a check with "reserve": true answered with;
	// required.
	Reservation string `json:"reservation"`
	// Cost is what the work really cost, ≥ 0: the excess over the
	// check's cost is post-charged (counted even past the quota), a
	// smaller cost refunded.
	Cost *int64 `json:"cost"`
}

// reservations are the API's checks kept to be settled: in this
// process's memory, so a settlement must reach the daemon that reserved,
// within floodgate.DefaultSettleWithin; past it a reservation keeps its
// cost. At most maxReservations are held at once.
type reservations struct {
	mu     sync.Mutex
	m      map[string]reservation
	purged time.Time // the last sweep of the expired
}

// maxReservations bounds the memory held for settlements (a few hundred
// bytes each): a caller reserving faster than it settles would otherwise
// grow it for the 10 minutes a reservation lives.
const maxReservations = 1 << 16

type reservation struct {
	out     engine.Outcome
	charged int64
	at      time.Time
}

// hold keeps out, admitted at cost charged, and returns its id; "" when
// maxReservations are held and none has expired, so the cost stands.
func (rs *reservations) hold(out engine.Outcome, charged int64, now time.Time) string {
	var b [16]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.m == nil {
		rs.m = map[string]reservation{}
	}
	// Now and then, forget the expired: every 1024 holds, and when full,
	// at most once a second (a sweep reads every reservation).
	if len(rs.m)%1024 == 1023 || len(rs.m) >= maxReservations && now.Sub(rs.purged) >= time.Second {
		rs.purged = now
		for k, r := range rs.m {
			if now.Sub(r.at) > floodgate.DefaultSettleWithin {
				delete(rs.m, k)
			}
		}
	}
	if len(rs.m) >= maxReservations {
		return ""
	}
	rs.m[id] = reservation{out, charged, now}
	return id
}

// take removes and returns the reservation id names, if it is held and
// not expired.
func (rs *reservations) take(id string, now time.Time) (reservation, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r, ok := rs.m[id]
	delete(rs.m, id)
	return r, ok && now.Sub(r.at) <= floodgate.DefaultSettleWithin
}

// reserve holds an admitted check that asked for it, and adds its id to
// the answer b (a JSON object); none when maxReservations are held.
func (s *Server) reserve(b []byte, req *CheckRequest, out *engine.Outcome) []byte {
	if !req.Reserve || out.Verdict != engine.Allowed || out.Degraded {
		return b
	}
	cost := int64(1)
	if req.Cost != nil {
		cost = *req.Cost
	}
	id := s.held.hold(*out, cost, time.Now())
	if id == "" {
		return b
	}
	b = append(b[:len(b)-1], `,"reservation":"`...)
	return append(append(b, id...), `"}`...)
}

// handleSettle is POST /v1/settle: 204 once settled, 404 for a
// reservation unknown, settled already or expired. The id, 128 random
// bits, is the capability: a caller with the check scope that holds it
// may settle it.
func (s *Server) handleSettle(w http.ResponseWriter, r *http.Request) {
	var req SettleRequest
	body, err := readBody(w, r)
	if err == nil {
		err = decodeStrict(body, &req)
	}
	maxCost := s.state.Load().cfg.API.MaxCost
	if err == nil && (req.Reservation == "" || req.Cost == nil || *req.Cost < 0 || *req.Cost > maxCost) {
		err = fmt.Errorf(`"reservation" and a "cost" within 0..%d (api.max_cost) are required`, maxCost)
	}
	if err != nil {
		writeProblem(w, http.StatusBadRequest, "Bad Request", err.Error())
		return
	}
	res, ok := s.held.take(req.Reservation, time.Now())
	if !ok {
		writeProblem(w, http.StatusNotFound, "Not Found", fmt.Sprintf("no reservation %q to settle: unknown, settled already, or older than %v", req.Reservation, floodgate.DefaultSettleWithin))
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	charged, actual := floodgate.Cost{Requests: res.charged, ContentBytes: res.charged}, floodgate.Cost{Requests: *req.Cost, ContentBytes: *req.Cost}
	if err := res.out.Settle(ctx, charged, actual, res.at); err != nil {
		writeProblem(w, http.StatusServiceUnavailable, "Service Unavailable", "rate limit store: "+err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// readBody reads a request body of at most maxBody bytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
}
