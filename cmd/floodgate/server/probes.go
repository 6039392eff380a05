package server

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// storeHealth asks the store (through WithStore's ping or the Redis
// client's) to answer within a second; nil when it did, or when the store
// is in process and needs no asking.
func (s *Server) storeHealth(ctx context.Context) error {
	if s.ping == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return s.ping(ctx)
}

// probeAnswer is the body of /readyz and /healthz/store.
type probeAnswer struct {
	Status string `json:"status"`          // ready, not_ready; up, down
	Store  string `json:"store,omitempty"` // up or down (readyz)
	// Degraded: the store is down and decisions follow the failure mode.
	Degraded   bool   `json:"degraded,omitempty"`
	FailClosed string `json:"fail_closed,omitempty"` // what refuses while the store is down
}

// handleReadyz answers 200 while the daemon answers decisions as
// configured (REQUIREMENTS S3): with the store up, or with it down when
// every rule fails open or to local, since those answers are what the
// configuration asked for and removing every replica from a Service would
// turn a store outage into a total one. Only when something fails closed
// does a store outage make the replica not ready (503).
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	a := probeAnswer{Status: "ready", Store: "up"}
	code := http.StatusOK
	if err := s.storeHealth(r.Context()); err != nil {
		a.Store, a.Degraded = "down", true
		if a.FailClosed = s.Config().FailsClosed(); a.FailClosed != "" {
			a.Status, code = "not_ready", http.StatusServiceUnavailable
		}
		s.logger.Warn("readiness: store unreachable", "error", err, "ready", code == http.StatusOK)
	}
	writeProbe(w, code, a)
}

// handleStoreHealth answers 200 when the store answers within a second,
// else 503: the store's health on its own, for alerts and
// dashboards, whatever the failure mode.
func (s *Server) handleStoreHealth(w http.ResponseWriter, r *http.Request) {
	if err := s.storeHealth(r.Context()); err != nil {
		// The error stays in the log: the probe is open to anyone who
		// reaches the admin listener, and the error names inner addresses.
		s.logger.Warn("store health: store unreachable", "error", err)
		writeProbe(w, http.StatusServiceUnavailable, probeAnswer{Status: "down"})
		return
	}
	writeProbe(w, http.StatusOK, probeAnswer{Status: "up"})
}

func writeProbe(w http.ResponseWriter, code int, a probeAnswer) {
	b, _ := json.Marshal(a) // plain strings and a bool: cannot fail
	writeJSON(w, code, b)
}
